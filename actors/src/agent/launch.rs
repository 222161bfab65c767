//! A container's command line and environment, built from its spec the way the kubelet does:
//! the image's command when `command` is empty, `$(VAR)` expansion, service and downward-API
//! variables (fields and resources), and values from ConfigMaps and Secrets (`env` and
//! `envFrom`); and the user it runs as (`securityContext`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, Pod, ResourceFieldSelector, Service,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::runtime::{Interactive, Resources};
use super::volumes::Mount;
use super::AgentConfig;
use crate::client::ApiClient;
use crate::core::ApiError;
use crate::model::{quantity, resources, text};

/// Why a container cannot be started (yet); reported as its waiting reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchError {
    /// The image names no known command line (ErrImagePull / ImagePullBackOff).
    UnknownImage(String),
    /// An env source is missing or bad (CreateContainerConfigError).
    Config(String),
}

impl LaunchError {
    /// What it says, whatever its kind.
    pub fn message(self) -> String {
        match self {
            LaunchError::UnknownImage(message) | LaunchError::Config(message) => message,
        }
    }
}

/// What the environment of a pod's containers draws on.
pub struct PodContext<'a> {
    pub pod: &'a Pod,
    pub node_name: &'a str,
    pub pod_ip: &'a str,
    pub host_ip: &'a str,
}

/// The host name a pod's containers have, as a container runtime gives it: the machine's for
/// a pod on the host's network, else its own ([`own_hostname`]).
fn pod_hostname(pod: &Pod) -> String {
    own_hostname(pod).unwrap_or_else(|| crate::machine::host_name().to_string())
}

/// The `/etc/hosts` of a pod's containers, as the kubelet writes it: for a pod of its own
/// network, the loopback names and the pod's host name at its IP (none before it has one),
/// for one on the host's, the node's own file (`node_hosts`); then the pod's `hostAliases`.
pub fn hosts_file(pod: &Pod, pod_ip: &str, node_hosts: &str) -> String {
    let spec = pod.spec.as_ref();
    let mut out = match own_hostname(pod) {
        None => node_hosts.to_string(),
        Some(hostname) => {
            let mut out = String::from(
                "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost \
                 ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\n\
                 fe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
            );
            if !pod_ip.is_empty() {
                out.push_str(&format!("{pod_ip}\t{hostname}\n"));
            }
            out
        }
    };
    let aliases = spec.and_then(|s| s.host_aliases.as_deref()).unwrap_or_default();
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for alias in aliases {
            let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
            out.push_str(&format!("{}\t{names}\n", alias.ip));
        }
    }
    out
}

/// The host name of a pod not on the host's network: `spec.hostname`, else the pod's name cut
/// to 63 characters (without a trailing `-` or `.`), as the kubelet works it out.
pub fn own_hostname(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.host_network) == Some(true) {
        return None;
    }
    if let Some(hostname) = spec.and_then(|s| s.hostname.as_deref()).filter(|h| !h.is_empty()) {
        return Some(hostname.to_string());
    }
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let cut = &name[..name.len().min(63)];
    Some(cut.trim_end_matches(['-', '.']).to_string())
}

/// `argv` run with `mounts` bound in a mount namespace of its own (through the agent's mount
/// launcher); as it is when there are none. Mounts the node cannot make are an error.
fn with_mounts(
    config: &AgentConfig,
    mounts: &[Mount],
    argv: Vec<String>,
) -> Result<Vec<String>, LaunchError> {
    if mounts.is_empty() {
        return Ok(argv);
    }
    let Some(launcher) = &config.mount_launcher else {
        return Err(LaunchError::Config("this node cannot mount volumes".into()));
    };
    let mut line = launcher.clone();
    for mount in mounts {
        line.push("--mount".into());
        line.push(serde_json::to_string(mount).unwrap_or_default());
    }
    line.push("--".into());
    line.extend(argv);
    Ok(line)
}

/// The command-line prefix that puts what is exec'd in the container `pid` into its mount
/// namespace, when the container was started with mounts (empty otherwise).
pub fn join_mounts(config: &AgentConfig, mounted: bool, pid: u32) -> Vec<String> {
    match (&config.join_mounts_launcher, mounted) {
        (Some(launcher), true) => through(launcher, "{pid}", &pid.to_string(), Vec::new()),
        _ => Vec::new(),
    }
}

/// The command-line prefix that puts what is exec'd in the container `pid` of `pod` into its
/// host name, when the container has one of its own (empty otherwise).
pub fn join_hostname(config: &AgentConfig, pod: &Pod, pid: u32) -> Vec<String> {
    match (&config.join_hostname_launcher, own_hostname(pod)) {
        (Some(launcher), Some(name)) => {
            let launcher = through(launcher, "{pid}", &pid.to_string(), Vec::new());
            through(&launcher, "{hostname}", &name, Vec::new())
        }
        _ => Vec::new(),
    }
}

/// What the runtime adds to a container's environment when it lacks them, after the kubelet's
/// variables are expanded (so `$(HOSTNAME)` and `$(HOME)` stay as they are written): `HOSTNAME`,
/// the pod's host name, and `HOME`, as runc sets it, the home directory of the user the
/// container runs as (`identity`'s, else the agent's), or `/` for a user the machine does not
/// know.
pub fn add_runtime_variables(
    env: &mut Vec<(String, String)>,
    pod: &Pod,
    identity: Option<&Identity>,
) {
    let lacks = |env: &[(String, String)], name: &str| !env.iter().any(|(n, _)| n == name);
    if lacks(env, "HOSTNAME") {
        env.push(("HOSTNAME".into(), pod_hostname(pod)));
    }
    if lacks(env, "HOME") {
        let uid = identity.and_then(|i| i.uid).unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        let user = nix::unistd::User::from_uid(uid.into()).ok().flatten();
        let home = user.map_or_else(|| "/".to_string(), |u| u.dir.to_string_lossy().into_owned());
        env.push(("HOME".into(), home));
    }
}

/// The environment of `container`: service variables (those of the pod's namespace, unless
/// `enableServiceLinks` is false, and the `kubernetes` Service's), the pod's own (POD_IP, POD_NAME,
/// POD_NAMESPACE, NODE_NAME), then every key of the ConfigMaps and Secrets its
/// `envFrom` names (with their prefix), then the container's `env` in order, later ones able
/// to refer to earlier ones as `$(NAME)`.
pub async fn environment(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    container: &Container,
) -> Result<Vec<(String, String)>, LaunchError> {
    let namespace = ctx.pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = ctx.pod.metadata.name.as_deref().unwrap_or("");
    let mut env: Vec<(String, String)> = Vec::new();
    let links = ctx.pod.spec.as_ref().and_then(|s| s.enable_service_links).unwrap_or(true);
    let services = resources::core("services");
    let mut own_kubernetes = false;
    if links {
        if let Ok(list) = client.list(services, Some(namespace), &Default::default()).await {
            for item in list.items {
                if let Ok(service) = serde_json::from_value::<Service>(item) {
                    // Only a service with a cluster IP has variables, and only such a one
                    // stands for `kubernetes`.
                    let variables = service_variables(&service);
                    own_kubernetes |= service.metadata.name.as_deref() == Some("kubernetes")
                        && !variables.is_empty();
                    env.extend(variables);
                }
            }
        }
    }
    // A `kubernetes` Service of the pod's own namespace wins, as with the kubelet.
    if !own_kubernetes {
        // The API server's own Service (`KUBERNETES_SERVICE_HOST`...) reaches every pod, links
        // or not, as the kubelet gives it.
        if let Ok(item) = client.get(services, "default", "kubernetes").await {
            if let Ok(service) = serde_json::from_value::<Service>(item) {
                env.extend(service_variables(&service));
            }
        }
    }
    for (k, v) in [
        ("POD_NAME", name),
        ("POD_NAMESPACE", namespace),
        ("POD_IP", ctx.pod_ip),
        ("NODE_NAME", ctx.node_name),
    ] {
        env.push((k.to_string(), v.to_string()));
    }
    for source in container.env_from.iter().flatten() {
        for (key, value) in env_from(client, namespace, source).await? {
            set(&mut env, &key, value);
        }
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(_)) => match value_from(client, ctx, container, namespace, var).await? {
                Some(v) => v,
                None => continue,
            },
            (Some(v), None) => expand(v, &env),
            (None, None) => String::new(),
        };
        set(&mut env, &var.name, value);
    }
    Ok(env)
}

fn set(env: &mut Vec<(String, String)>, name: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name.to_string(), value)),
    }
}

/// The variables of an `envFrom` source: each key of its ConfigMap's `data` or its Secret's,
/// with the prefix; none when the source is optional and missing. (Every key a ConfigMap or
/// Secret may hold names a variable, as Kubernetes' relaxed variable names allow.)
async fn env_from(
    client: &dyn ApiClient,
    namespace: &str,
    source: &EnvFromSource,
) -> Result<Vec<(String, String)>, LaunchError> {
    let (plural, name, optional) = match (&source.config_map_ref, &source.secret_ref) {
        (Some(r), _) => ("configmaps", r.name.as_str(), r.optional.unwrap_or(false)),
        (None, Some(r)) => ("secrets", r.name.as_str(), r.optional.unwrap_or(false)),
        (None, None) => return Ok(Vec::new()),
    };
    let Some(object) = source_object(client, plural, namespace, name, optional).await? else {
        return Ok(Vec::new());
    };
    let prefix = source.prefix.as_deref().unwrap_or("");
    let data = object.get("data").and_then(Value::as_object).into_iter().flatten();
    Ok(data
        .filter_map(|(key, value)| {
            let value = value.as_str()?;
            let value = match plural {
                "secrets" => decoded_secret(value)?,
                _ => value.to_string(),
            };
            Some((format!("{prefix}{key}"), value))
        })
        .collect())
}

/// A ConfigMap or Secret an environment draws on; `None` when it is optional and missing.
pub(super) async fn source_object(
    client: &dyn ApiClient,
    plural: &str,
    namespace: &str,
    name: &str,
    optional: bool,
) -> Result<Option<Value>, LaunchError> {
    let resource = resources::find("", "v1", plural).expect("served");
    let kind = if plural == "secrets" { "secret" } else { "configmap" };
    match client.get(resource, namespace, name).await {
        Ok(object) => Ok(Some(object)),
        // Only a missing source is skipped when optional, as the kubelet skips it.
        Err(ApiError::NotFound { .. }) if optional => Ok(None),
        // As the kubelet's object managers word it.
        Err(ApiError::NotFound { .. }) => {
            Err(LaunchError::Config(format!("{kind} \"{name}\" not found")))
        }
        Err(e) => Err(LaunchError::Config(format!("{kind} \"{name}\": {e}"))),
    }
}

pub(super) fn decoded_secret(base64: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(base64).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A `resourceFieldRef`'s value, as the kubelet works it out: the named container's (else
/// `container`, the one asking; a volume's names one) limit or request, divided by the
/// divisor and rounded up; a limit not set is the node's allocatable amount.
pub(super) async fn resource_value(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    container: Option<&Container>,
    field: &ResourceFieldSelector,
) -> Result<String, LaunchError> {
    let unsupported =
        || LaunchError::Config(format!("unsupported container resource : {:?}", field.resource));
    let named = field.container_name.as_deref().filter(|n| !n.is_empty());
    let target = match (named, container) {
        (None, Some(container)) => container,
        (None, None) => return Err(LaunchError::Config("container  not found".into())),
        (Some(name), _) => {
            let spec = ctx.pod.spec.as_ref();
            let all = spec
                .into_iter()
                .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()));
            all.into_iter()
                .find(|c| c.name == name)
                .ok_or_else(|| LaunchError::Config(format!("container {name} not found")))?
        }
    };
    let (amounts, resource) = field.resource.split_once('.').ok_or_else(unsupported)?;
    let huge_pages = resource.starts_with("hugepages-");
    if !matches!(resource, "cpu" | "memory" | "ephemeral-storage") && !huge_pages {
        return Err(unsupported());
    }
    let resources = target.resources.as_ref();
    let declared = match amounts {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return Err(unsupported()),
    };
    let declared = declared.and_then(|d| d.get(resource)).map(|q| q.0.clone());
    let amount = match (declared, amounts) {
        (Some(amount), _) => amount,
        (None, "limits") => {
            let node = client.get(resources::core("nodes"), "", ctx.node_name).await;
            let node = node.map_err(|e| LaunchError::Config(format!("node: {e}")))?;
            let allocatable = node.pointer(&format!("/status/allocatable/{resource}"));
            allocatable.and_then(Value::as_str).unwrap_or("0").to_string()
        }
        (None, _) => "0".to_string(),
    };
    // A zero divisor (what the server writes for one left out) is 1, as in Kubernetes.
    let divisor = field.divisor.as_ref().map_or("1", |d| d.0.as_str());
    let divisor = if quantity::value(divisor) == Ok(0) { "1" } else { divisor };
    let bad = |what: &str| LaunchError::Config(format!("{}: bad {what}", field.resource));
    let (amount, divisor) = if resource == "cpu" {
        let amount = quantity::milli_value(&amount).map_err(|_| bad("quantity"))?;
        (amount, quantity::milli_value(divisor).map_err(|_| bad("divisor"))?)
    } else {
        let amount = quantity::value(&amount).map_err(|_| bad("quantity"))?;
        (amount, quantity::value(divisor).map_err(|_| bad("divisor"))?)
    };
    if divisor <= 0 {
        return Err(bad("divisor"));
    }
    // Rounded up: a container with 250m of CPU sees 1 (core).
    let (amount, divisor) = (i128::from(amount), i128::from(divisor));
    Ok(((amount + divisor - 1).div_euclid(divisor)).to_string())
}

/// A `fieldRef`'s value, as the kubelet's downward API gives it: a field of the pod, one of its
/// labels or annotations, or (in a volume's files only, which validation sees to) all of them
/// as `key="value"` lines in key order.
pub(super) fn field_value(ctx: &PodContext<'_>, path: &str) -> Result<String, LaunchError> {
    let meta = &ctx.pod.metadata;
    let label = |map: &Option<BTreeMap<String, String>>, prefix: &str| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        map.as_ref()?.get(key).cloned()
    };
    let value = match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "metadata.labels" => Some(format_map(meta.labels.as_ref())),
        "metadata.annotations" => Some(format_map(meta.annotations.as_ref())),
        // `spec.host` is the older name of `spec.nodeName`; a pod has one address of each
        // kind here, so the lists are that one.
        "spec.nodeName" | "spec.host" => Some(ctx.node_name.to_string()),
        "spec.serviceAccountName" => {
            ctx.pod.spec.as_ref().and_then(|s| s.service_account_name.clone())
        }
        "status.podIP" | "status.podIPs" => Some(ctx.pod_ip.to_string()),
        "status.hostIP" | "status.hostIPs" => Some(ctx.host_ip.to_string()),
        p if p.starts_with("metadata.labels['") => label(&meta.labels, "metadata.labels['"),
        p if p.starts_with("metadata.annotations['") => {
            label(&meta.annotations, "metadata.annotations['")
        }
        other => return Err(LaunchError::Config(format!("unsupported fieldRef {other:?}"))),
    };
    Ok(value.unwrap_or_default())
}

/// A map as the downward API writes it in a file: `key="value"` lines in key order, each
/// value quoted and escaped as Go's `%q` does, no newline after the last.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    let lines =
        map.into_iter().flatten().map(|(key, value)| format!("{key}={}", text::go_quote(value)));
    lines.collect::<Vec<_>>().join("\n")
}

/// A `valueFrom` source; `None` when it is optional and missing.
async fn value_from(
    client: &dyn ApiClient,
    ctx: &PodContext<'_>,
    container: &Container,
    namespace: &str,
    var: &EnvVar,
) -> Result<Option<String>, LaunchError> {
    let source = var.value_from.as_ref().expect("checked by the caller");
    if let Some(field) = &source.resource_field_ref {
        return resource_value(client, ctx, Some(container), field).await.map(Some);
    }
    if let Some(field) = &source.field_ref {
        return field_value(ctx, &field.field_path).map(Some);
    }
    let (plural, selector) = if let Some(r) = &source.config_map_key_ref {
        ("configmaps", (r.name.as_str(), r.key.as_str(), r.optional.unwrap_or(false)))
    } else if let Some(r) = &source.secret_key_ref {
        ("secrets", (r.name.as_str(), r.key.as_str(), r.optional.unwrap_or(false)))
    } else {
        return Err(LaunchError::Config(format!("env {}: no value source", var.name)));
    };
    let (object_name, key, optional) = selector;
    let kind = if plural == "secrets" { "Secret" } else { "ConfigMap" };
    let Some(object) = source_object(client, plural, namespace, object_name, optional).await?
    else {
        return Ok(None);
    };
    let value = object.pointer(&format!("/data/{}", pointer_escape(key))).and_then(Value::as_str);
    let value = match plural {
        "secrets" => value.and_then(decoded_secret),
        _ => value.map(String::from),
    };
    match value {
        Some(v) => Ok(Some(v)),
        None if optional => Ok(None),
        None => Err(LaunchError::Config(format!(
            "couldn't find key {key} in {kind} {namespace}/{object_name}"
        ))),
    }
}

fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The docker-link style variables of a service (`WEB_SERVICE_HOST`, `WEB_SERVICE_PORT`, ...).
pub fn service_variables(service: &Service) -> Vec<(String, String)> {
    let Some(spec) = &service.spec else { return vec![] };
    let ip = match spec.cluster_ip.as_deref() {
        Some(ip) if !ip.is_empty() && ip != "None" => ip,
        _ => return vec![],
    };
    let prefix = service.metadata.name.as_deref().unwrap_or("").to_uppercase().replace('-', "_");
    let ports = spec.ports.as_deref().unwrap_or(&[]);
    let Some(first) = ports.first() else { return vec![] };
    let mut vars = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.to_string()),
        (format!("{prefix}_SERVICE_PORT"), first.port.to_string()),
    ];
    for port in ports {
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let name = name.to_uppercase().replace('-', "_");
            vars.push((format!("{prefix}_SERVICE_PORT_{name}"), port.port.to_string()));
        }
    }
    let protocol = |p: &k8s_openapi::api::core::v1::ServicePort| {
        p.protocol.clone().unwrap_or_else(|| "TCP".into())
    };
    vars.push((
        format!("{prefix}_PORT"),
        format!("{}://{ip}:{}", protocol(first).to_lowercase(), first.port),
    ));
    for port in ports {
        let proto = protocol(port);
        let base = format!("{prefix}_PORT_{}_{}", port.port, proto.to_uppercase());
        vars.push((base.clone(), format!("{}://{ip}:{}", proto.to_lowercase(), port.port)));
        vars.push((format!("{base}_PROTO"), proto.to_lowercase()));
        vars.push((format!("{base}_PORT"), port.port.to_string()));
        vars.push((format!("{base}_ADDR"), ip.to_string()));
    }
    vars
}

/// Expands `$(NAME)` references to variables defined so far; `$$(NAME)` escapes to
/// `$(NAME)`, and unknown references stay as written (as Kubernetes does).
pub fn expand(input: &str, env: &[(String, String)]) -> String {
    let lookup: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    expand_with(input, |name| lookup.get(name).copied())
}

/// Expands a volume mount's `subPathExpr` as the kubelet does: every reference must be to a
/// variable with a value (`missing value for A, B` names those without, sorted).
pub fn expand_sub_path(input: &str, env: &[(String, String)]) -> Result<String, LaunchError> {
    let lookup: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut missing = std::collections::BTreeSet::new();
    let expanded = expand_with(input, |name| match lookup.get(name) {
        Some(value) if !value.is_empty() => Some(*value),
        _ => {
            missing.insert(name.to_string());
            Some("")
        }
    });
    if missing.is_empty() {
        Ok(expanded)
    } else {
        let names: Vec<String> = missing.into_iter().collect();
        Err(LaunchError::Config(format!("missing value for {}", names.join(", "))))
    }
}

/// Expands `$(NAME)` references by `lookup` (`None`: the reference stays as written); `$$`
/// is `$`.
fn expand_with<'a>(input: &str, mut lookup: impl FnMut(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The command line of a container: `command` + `args`, or the image's command + `args`
/// (`args` replacing nothing), expanded; wrapped by the memory-limit launcher when the container
/// has a memory limit and one is configured, and then by the terminal launcher when it gets a
/// terminal (see [`interactive`]).
/// Who a container's processes run as, from the pod's and the container's `securityContext`
/// (the container's settings first), as the kubelet hands them to its runtime: `runAsUser`,
/// `runAsGroup` (else the user's primary group on this node, else 0, as a runtime takes it
/// from the image's `/etc/passwd`), and the supplementary groups (that group,
/// `supplementalGroups` and `fsGroup`). What is `None` stays the agent's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub groups: Vec<u32>,
}

impl Identity {
    /// The identity `container` of `pod` runs as (`None`: the agent's), or why it may not
    /// run: a `runAsNonRoot` container that would run as root, in the kubelet's words.
    pub fn of(pod: &Pod, container: &Container) -> Result<Option<Identity>, LaunchError> {
        let of_pod = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
        let of_container = container.security_context.as_ref();
        let uid = of_container.and_then(|c| c.run_as_user).or(of_pod.and_then(|p| p.run_as_user));
        let gid = of_container.and_then(|c| c.run_as_group).or(of_pod.and_then(|p| p.run_as_group));
        let non_root = of_container
            .and_then(|c| c.run_as_non_root)
            .or(of_pod.and_then(|p| p.run_as_non_root))
            .unwrap_or(false);
        if non_root {
            let named = || {
                let meta = &pod.metadata;
                let (name, namespace) = (meta.name.as_deref(), meta.namespace.as_deref());
                let uid = meta.uid.as_deref().unwrap_or_default();
                format!(
                    "(pod: \"{}_{}({uid})\", container: {})",
                    name.unwrap_or_default(),
                    namespace.unwrap_or_default(),
                    container.name
                )
            };
            if uid == Some(0) {
                return Err(LaunchError::Config(format!(
                    "container's runAsUser breaks non-root policy {}",
                    named()
                )));
            }
            // Without a user, the container runs as the agent's, the image user here.
            if uid.unwrap_or_else(|| nix::unistd::geteuid().as_raw().into()) == 0 {
                return Err(LaunchError::Config(format!(
                    "container has runAsNonRoot and image will run as root {}",
                    named()
                )));
            }
        }
        let supplemental = of_pod.and_then(|p| p.supplemental_groups.as_ref());
        let mut groups: Vec<u32> = supplemental
            .into_iter()
            .flatten()
            .chain(of_pod.and_then(|p| p.fs_group.as_ref()))
            .filter_map(|g| u32::try_from(*g).ok())
            .collect();
        if uid.is_none() && gid.is_none() && groups.is_empty() {
            return Ok(None);
        }
        let uid = uid.and_then(|u| u32::try_from(u).ok());
        let gid = gid.and_then(|g| u32::try_from(g).ok()).or_else(|| {
            let user = uid.and_then(|u| nix::unistd::User::from_uid(u.into()).ok().flatten());
            uid.map(|_| user.map_or(0, |user| user.gid.as_raw()))
        });
        groups.extend(gid);
        groups.sort_unstable();
        groups.dedup();
        Ok(Some(Identity { uid, gid, groups }))
    }

    /// `argv` run as this identity through the agent's identity launcher (as it is without
    /// one).
    pub fn wrap(
        config: &AgentConfig,
        identity: Option<&Identity>,
        argv: Vec<String>,
    ) -> Vec<String> {
        let (Some(identity), Some(launcher)) = (identity, &config.identity_launcher) else {
            return argv;
        };
        through(launcher, "{identity}", &identity.to_string(), argv)
    }
}

/// `argv` run through `launcher`, its `placeholder` replaced by `value`.
fn through(launcher: &[String], placeholder: &str, value: &str, argv: Vec<String>) -> Vec<String> {
    let prefix = launcher.iter().map(|part| part.replace(placeholder, value));
    prefix.chain(argv).collect()
}

/// `UID:GID:GROUP,GROUP` (an empty part: unchanged), what `kplane exec-limited --as` takes.
impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |id: Option<u32>| id.map(|id| id.to_string()).unwrap_or_default();
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        write!(f, "{}:{}:{}", text(self.uid), text(self.gid), groups.join(","))
    }
}

impl std::str::FromStr for Identity {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not UID:GID:GROUP,GROUP");
        let mut parts = text.split(':');
        let (Some(uid), Some(gid), Some(groups), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let id = |part: &str| match part {
            "" => Ok(None),
            id => id.parse().map(Some).map_err(|_| bad()),
        };
        let groups = groups.split(',').filter(|g| !g.is_empty());
        Ok(Identity {
            uid: id(uid)?,
            gid: id(gid)?,
            groups: groups.map(|g| g.parse().map_err(|_| bad())).collect::<Result<_, _>>()?,
        })
    }
}

/// A container's command line, and the program it comes down to once its launchers have
/// done their part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    pub argv: Vec<String>,
    /// The container's own program (its command's or its image's first word).
    pub program: String,
    /// It binds mounts in a mount namespace of its own, which what is exec'd in it joins.
    pub mounted: bool,
}

/// The command line of `container`: its own or its image's, expanded, run as `identity`
/// within its memory limit, by a first process that notes how it ended in `exit_file`, with
/// `hostname` (its pod's own, if it has one) and, for a `tty`, on its terminal (each through
/// the agent's launcher for it).
pub fn command_line(
    config: &AgentConfig,
    container: &Container,
    env: &[(String, String)],
    identity: Option<&Identity>,
    hostname: Option<&str>,
    mounts: &[Mount],
    exit_file: Option<&Path>,
) -> Result<CommandLine, LaunchError> {
    let args: Vec<String> = container.args.iter().flatten().map(|a| expand(a, env)).collect();
    let image = container.image.as_deref().unwrap_or("");
    let mut argv: Vec<String> = match container.command.as_deref() {
        Some(command) if !command.is_empty() => command.iter().map(|c| expand(c, env)).collect(),
        _ => match config.resolve_image(image) {
            Some(image_command) => image_command.clone(),
            // An image this node does not know is taken as a base image without an entry
            // point (busybox's, alpine's): the args replace its command and are the command
            // line (`kubectl run x --image=busybox -- sh -c '...'`).
            None if !args.is_empty() => Vec::new(),
            None => {
                return Err(LaunchError::UnknownImage(format!(
                    "image {image:?} is not known to this node: give the container a command \
                     or args, or map the image to a command line in [runtime.images]"
                )))
            }
        },
    };
    argv.extend(args);
    let program = argv.first().cloned().unwrap_or_default();
    argv = Identity::wrap(config, identity, argv);
    // Inside the first process, which stays: its own memory is not the container's limit (a
    // limit of a few MiB would not let it start).
    let limit = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        .and_then(|q| quantity::value(&q.0).ok());
    if let (Some(bytes), Some(launcher)) = (limit, &config.memory_limit_launcher) {
        argv = through(launcher, "{bytes}", &bytes.to_string(), argv);
    }
    // Outside the change of user (the note is the agent's to write), inside the container's
    // namespaces: what joins the container joins those of its first process.
    if let (Some(file), Some(launcher)) = (exit_file, &config.exit_launcher) {
        argv = through(launcher, "{file}", &file.to_string_lossy(), argv);
    }
    // Outside the change of user, which could no longer make a namespace.
    if let (Some(name), Some(launcher)) = (hostname, &config.hostname_launcher) {
        argv = through(launcher, "{hostname}", name, argv);
    }
    // Outside the host name's too: the container's mounts are all there once it has its name,
    // which is what a process joining it waits for (see `join_hostname`).
    argv = with_mounts(config, mounts, argv)?;
    let mounted = !mounts.is_empty();
    if let (true, Some(launcher)) = (interactive(config, container).tty, &config.terminal_launcher)
    {
        argv.splice(0..0, launcher.iter().cloned());
    }
    Ok(CommandLine { argv, program, mounted })
}

/// `argv` with the OOM score adjustment the kubelet gives container `container` of `pod` (as
/// the API serves it) on a node of `memory_capacity` bytes (by the pod's QoS class), when the
/// node can set one.
pub fn with_oom_score(
    config: &AgentConfig,
    pod: &Value,
    container: &str,
    memory_capacity: u64,
    argv: Vec<String>,
) -> Vec<String> {
    let Some(launcher) = &config.oom_score_launcher else { return argv };
    let spec = &pod["spec"];
    let lists = ["containers", "initContainers", "ephemeralContainers"];
    let mut all = lists.iter().flat_map(|list| spec[*list].as_array().into_iter().flatten());
    let found = all.find(|c| c["name"] == container).unwrap_or(&Value::Null);
    let score = crate::model::qos::oom_score_adj(spec, found, memory_capacity);
    through(launcher, "{score}", &score.to_string(), argv)
}

/// What a runtime that enforces resources holds `container` to: its memory limit and its CPU
/// limit and request (amounts that do not parse, or are not positive, are left out).
pub fn resources(container: &Container) -> Resources {
    let resources = container.resources.as_ref();
    let amount = |list: Option<&BTreeMap<String, Quantity>>, name: &str, milli: bool| {
        let text = &list?.get(name)?.0;
        let value = if milli { quantity::milli_value(text) } else { quantity::value(text) };
        value.ok().and_then(|v| u64::try_from(v).ok()).filter(|v| *v > 0)
    };
    let limits = resources.and_then(|r| r.limits.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    Resources {
        memory_limit: amount(limits, "memory", false),
        cpu_limit_millis: amount(limits, "cpu", true),
        cpu_request_millis: amount(requests, "cpu", true),
    }
}

/// Adds the `TERM` container runtimes give a container or command on a terminal, unless its
/// environment sets one.
pub fn with_terminal_type(env: &mut Vec<(String, String)>) {
    if !env.iter().any(|(k, _)| k == "TERM") {
        env.push(("TERM".into(), "xterm".into()));
    }
}

/// Whether `container` gets a stdin to attach to and a terminal, as its spec asks: a terminal
/// only where the node can make it the container's controlling one.
pub fn interactive(config: &AgentConfig, container: &Container) -> Interactive {
    Interactive {
        stdin: container.stdin.unwrap_or(false),
        stdin_once: container.stdin_once.unwrap_or(false),
        tty: container.tty.unwrap_or(false) && config.terminal_launcher.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_file_names_the_pod_and_its_aliases() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c"}], "hostAliases": [
                {"ip": "123.45.67.89", "hostnames": ["foo.remote", "bar.remote"]}]}}))
        .unwrap();
        let hosts = hosts_file(&pod, "127.64.0.7", "ignored");
        assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(hosts.ends_with(
            "fe00::2\tip6-allrouters\n127.64.0.7\tweb\n\n# Entries added by HostAliases.\n\
             123.45.67.89\tfoo.remote\tbar.remote\n"
        ));
        let mut on_host = pod.clone();
        on_host.spec.as_mut().unwrap().host_network = Some(true);
        on_host.spec.as_mut().unwrap().host_aliases = None;
        assert_eq!(hosts_file(&on_host, "10.0.0.1", "127.0.0.1 node\n"), "127.0.0.1 node\n");
    }

    #[test]
    fn containers_get_the_pod_s_host_name_and_their_user_s_home() {
        let pod = |spec: Value, name: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
        };
        let containers = json!([{"name": "c"}]);
        assert_eq!(pod_hostname(&pod(json!({"containers": containers}), "web")), "web");
        let named = json!({"containers": containers, "hostname": "custom"});
        assert_eq!(pod_hostname(&pod(named, "web")), "custom");
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(pod_hostname(&pod(json!({"containers": containers}), &long)), "a".repeat(62));
        let host = json!({"containers": containers, "hostNetwork": true, "hostname": "ignored"});
        assert_eq!(pod_hostname(&pod(host, "web")), crate::machine::host_name());

        let web = pod(json!({"containers": containers}), "web");
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let mut env = vec![pair("HOME", "/mine"), pair("HOSTNAME", "set")];
        add_runtime_variables(&mut env, &web, None);
        assert_eq!(env, [pair("HOME", "/mine"), pair("HOSTNAME", "set")], "those set are kept");
        let root = Identity { uid: Some(0), gid: None, groups: Vec::new() };
        let mut env = Vec::new();
        add_runtime_variables(&mut env, &web, Some(&root));
        assert_eq!(env, [pair("HOSTNAME", "web"), pair("HOME", "/root")]);
        let nobody_known = Identity { uid: Some(4_000_000_000), gid: None, groups: Vec::new() };
        let mut env = Vec::new();
        add_runtime_variables(&mut env, &web, Some(&nobody_known));
        assert_eq!(env, [pair("HOSTNAME", "web"), pair("HOME", "/")]);
    }
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_containers_identity_comes_from_its_security_context_over_its_pods() {
        let pod = |security: Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                "spec": {"securityContext": security, "containers": [{"name": "c"}]}}))
            .unwrap()
        };
        let container = |security: Value| -> Container {
            serde_json::from_value(json!({"name": "c", "securityContext": security})).unwrap()
        };
        let of = |p: Value, c: Value| Identity::of(&pod(p), &container(c));
        assert_eq!(of(json!({}), json!({})).unwrap(), None);
        let full = of(
            json!({"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
            "supplementalGroups": [4000]}),
            json!({"runAsUser": 1001}),
        );
        let expected =
            Identity { uid: Some(1001), gid: Some(3000), groups: vec![2000, 3000, 4000] };
        assert_eq!(full.unwrap(), Some(expected.clone()));
        assert_eq!(expected.to_string(), "1001:3000:2000,3000,4000");
        assert_eq!(expected.to_string().parse::<Identity>().unwrap(), expected);
        // A user without a group: its primary group on this node (root's is 0).
        let root = of(json!({"runAsUser": 0}), json!({})).unwrap().unwrap();
        assert_eq!((root.gid, root.groups), (Some(0), vec![0]));
        // Only groups: the agent's user with them.
        let grouped = of(json!({"fsGroup": 2000}), json!({})).unwrap().unwrap();
        assert_eq!((grouped.uid, grouped.gid, grouped.groups), (None, None, vec![2000]));
        // runAsNonRoot, in the kubelet's words.
        let refused = |p: Value, c: Value| match of(p, c) {
            Err(LaunchError::Config(message)) => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refused(json!({"runAsNonRoot": true}), json!({"runAsUser": 0})),
            "container's runAsUser breaks non-root policy (pod: \"p_ns(u)\", container: c)"
        );
        assert_eq!(
            refused(json!({"runAsUser": 0}), json!({"runAsNonRoot": true})),
            "container's runAsUser breaks non-root policy (pod: \"p_ns(u)\", container: c)"
        );
        if nix::unistd::geteuid().is_root() {
            assert_eq!(
                refused(json!({"runAsNonRoot": true}), json!({})),
                "container has runAsNonRoot and image will run as root (pod: \"p_ns(u)\", \
                 container: c)"
            );
        }
        assert!(of(json!({"runAsNonRoot": true, "runAsUser": 1000}), json!({})).is_ok());
        // With no user, the agent's: as root here it would run as root.
        let agent_is_root = nix::unistd::geteuid().is_root();
        assert_eq!(of(json!({"runAsNonRoot": true}), json!({})).is_err(), agent_is_root);
        // Wrapped by the identity launcher, when the agent has one.
        let mut config = AgentConfig::new("n", "/tmp".into());
        let argv = vec!["id".to_string()];
        assert_eq!(Identity::wrap(&config, Some(&expected), argv.clone()), ["id"]);
        config.identity_launcher = Some(vec!["as".into(), "{identity}".into(), "--".into()]);
        assert_eq!(
            Identity::wrap(&config, Some(&expected), argv.clone()),
            ["as", "1001:3000:2000,3000,4000", "--", "id"]
        );
        assert_eq!(Identity::wrap(&config, None, argv), ["id"]);
    }

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let env = vars(&[("A", "1"), ("B", "two")]);
        assert_eq!(expand("x$(A)y$(B)", &env), "x1ytwo");
        assert_eq!(expand("$$(A) $(C) $ $(", &env), "$(A) $(C) $ $(");
    }

    #[test]
    fn command_lines_come_from_the_spec_or_the_image() {
        let mut config = AgentConfig::new("n", "/tmp".into());
        config.images.insert("kplane/agnhost".into(), vec!["kplane".into(), "agnhost".into()]);
        config.memory_limit_launcher =
            Some(vec!["limit".into(), "--bytes={bytes}".into(), "--".into()]);
        let container: Container = serde_json::from_value(json!({
            "name": "c", "image": "kplane/agnhost:2.40", "args": ["netexec", "--port=$(P)"],
            "resources": {"limits": {"memory": "64Mi"}}
        }))
        .unwrap();
        let argv = command_line(&config, &container, &vars(&[("P", "80")]), None, None, &[], None)
            .unwrap()
            .argv;
        assert_eq!(
            argv,
            ["limit", "--bytes=67108864", "--", "kplane", "agnhost", "netexec", "--port=80"]
        );
        let own: Container =
            serde_json::from_value(json!({"name": "c", "image": "nginx", "command": ["sh"]}))
                .unwrap();
        assert_eq!(command_line(&config, &own, &[], None, None, &[], None).unwrap().argv, ["sh"]);
        let unknown: Container =
            serde_json::from_value(json!({"name": "c", "image": "nginx"})).unwrap();
        assert!(matches!(
            command_line(&config, &unknown, &[], None, None, &[], None),
            Err(LaunchError::UnknownImage(_))
        ));
        // Args alone, for an image the node does not know, are the command line.
        let args_only: Container = serde_json::from_value(
            json!({"name": "c", "image": "busybox", "args": ["sh", "-c", "echo $(P)"]}),
        )
        .unwrap();
        let argv = command_line(&config, &args_only, &vars(&[("P", "80")]), None, None, &[], None);
        assert_eq!(argv.unwrap().argv, ["sh", "-c", "echo 80"]);
    }

    #[test]
    fn a_tty_container_runs_through_the_terminal_launcher_where_there_is_one() {
        let mut config = AgentConfig::new("n", "/tmp".into());
        let shell: Container = serde_json::from_value(json!({
            "name": "c", "image": "any", "command": ["sh"], "stdin": true, "tty": true
        }))
        .unwrap();
        let asked = Interactive { stdin: true, stdin_once: false, tty: true };
        let no_terminal = Interactive { tty: false, ..asked };
        assert_eq!(interactive(&config, &shell), no_terminal);
        assert_eq!(command_line(&config, &shell, &[], None, None, &[], None).unwrap().argv, ["sh"]);
        config.terminal_launcher = Some(vec!["on-tty".into(), "--".into()]);
        assert_eq!(interactive(&config, &shell), asked);
        let line = command_line(&config, &shell, &[], None, None, &[], None).unwrap();
        assert_eq!(line.argv, ["on-tty", "--", "sh"]);
        assert_eq!(line.program, "sh", "what the launchers come down to");
    }

    #[test]
    fn the_exit_noting_first_process_sits_inside_the_namespaces_outside_user_and_limit() {
        let mut config = AgentConfig::new("n", "/tmp".into());
        config.identity_launcher = Some(vec!["as".into(), "{identity}".into(), "--".into()]);
        config.hostname_launcher = Some(vec!["named".into(), "{hostname}".into(), "--".into()]);
        config.exit_launcher = Some(vec!["noting".into(), "{file}".into(), "--".into()]);
        config.memory_limit_launcher = Some(vec!["limit".into(), "{bytes}".into(), "--".into()]);
        let container: Container = serde_json::from_value(json!({"name": "c", "image": "any",
            "command": ["sh"], "resources": {"limits": {"memory": "2Mi"}}}))
        .unwrap();
        let identity: Identity = "1000:1000:".parse().unwrap();
        let exit = Path::new("/data/pods/p/c/exit.json");
        let line =
            command_line(&config, &container, &[], Some(&identity), Some("h"), &[], Some(exit));
        // The first process stays, so it runs outside the memory limit (a few MiB would not
        // let it start), which its command gets.
        let expected = [
            "named",
            "h",
            "--",
            "noting",
            "/data/pods/p/c/exit.json",
            "--",
            "limit",
            "2097152",
            "--",
            "as",
            "1000:1000:",
            "--",
            "sh",
        ];
        assert_eq!(line.unwrap().argv, expected);
        // Without a file to note it in, there is no such first process.
        let line = command_line(&config, &container, &[], None, None, &[], None).unwrap();
        assert_eq!(line.argv, ["limit", "2097152", "--", "sh"]);
    }

    #[actix::test]
    async fn env_from_sources_and_resource_fields_become_variables() {
        use crate::core::WriteOptions;
        let core = crate::testing::core().await;
        let write = WriteOptions::default();
        let create = |plural: &str, namespace: &'static str, object: Value| {
            let (core, resource) = (core.clone(), resources::core(plural));
            async move { core.create(resource, namespace, object, &WriteOptions::default()).await }
        };
        create(
            "configmaps",
            "default",
            json!({"metadata": {"name": "settings"},
            "data": {"FOO_A": "a", "FOO_B": "b", "dotted.key": "x"}}),
        )
        .await
        .unwrap();
        create(
            "secrets",
            "default",
            json!({"metadata": {"name": "creds"},
            "data": {"TOKEN": "czNjcjN0"}}),
        )
        .await
        .unwrap();
        create("nodes", "", json!({"metadata": {"name": "n1"}})).await.unwrap();
        let node = json!({"metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}});
        core.update_status(resources::core("nodes"), "", "n1", node, &write).await.unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "x",
                "resources": {"limits": {"cpu": "250m"}, "requests": {"memory": "100Mi"}}},
                {"name": "other", "image": "x", "resources": {"limits": {"memory": "3Gi"}}},
                {"name": "big", "image": "x", "resources": {"limits": {"memory": "9E"}}}]}
        }))
        .unwrap();
        let container: Container = serde_json::from_value(json!({
            "name": "app", "image": "x",
            "resources": {"limits": {"cpu": "250m"},
                "requests": {"memory": "100Mi", "hugepages-2Mi": "4Mi"}},
            "envFrom": [{"configMapRef": {"name": "settings"}},
                {"prefix": "P_", "secretRef": {"name": "creds"}},
                {"configMapRef": {"name": "absent", "optional": true}}],
            "env": [{"name": "FOO_B", "value": "mine $(FOO_A)"},
                {"name": "NOT_YET", "value": "$(HOSTNAME) $(HOME)"},
                {"name": "HUGE", "valueFrom": {"resourceFieldRef":
                    {"resource": "requests.hugepages-2Mi", "divisor": "1Mi"}}},
                {"name": "CORES", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "CORES_0", "valueFrom": {"resourceFieldRef":
                    {"resource": "limits.cpu", "divisor": "0"}}},
                {"name": "MILLIS", "valueFrom": {"resourceFieldRef":
                    {"resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "MEM_MI", "valueFrom": {"resourceFieldRef":
                    {"resource": "requests.memory", "divisor": "1Mi"}}},
                {"name": "NODE_MEM", "valueFrom": {"resourceFieldRef":
                    {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "OTHER_MEM", "valueFrom": {"resourceFieldRef":
                    {"containerName": "other", "resource": "limits.memory", "divisor": "1Gi"}}},
                {"name": "BIG", "valueFrom": {"resourceFieldRef":
                    {"containerName": "big", "resource": "limits.memory", "divisor": "1E"}}}]
        }))
        .unwrap();
        let ctx = PodContext { pod: &pod, node_name: "n1", pod_ip: "", host_ip: "" };
        let env = environment(&core, &ctx, &container).await.unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!((get("FOO_A"), get("P_TOKEN")), (Some("a"), Some("s3cr3t")));
        assert_eq!(get("dotted.key"), Some("x"));
        // `env` overrides `envFrom`, and may refer to it.
        assert_eq!(get("FOO_B"), Some("mine a"));
        // What the runtime sets comes after: not there to expand, as in Kubernetes.
        assert_eq!((get("NOT_YET"), get("HOSTNAME")), (Some("$(HOSTNAME) $(HOME)"), None));
        assert_eq!(get("HUGE"), Some("4"));
        // A zero divisor is 1, as the server writes one left out.
        assert_eq!(get("CORES_0"), get("CORES"));
        // 250m rounds up to a core; a limit not set is the node's allocatable.
        assert_eq!(
            (get("CORES"), get("MILLIS"), get("MEM_MI")),
            (Some("1"), Some("250"), Some("100"))
        );
        assert_eq!((get("NODE_MEM"), get("OTHER_MEM")), (Some("1024"), Some("3")));
        assert_eq!(get("BIG"), Some("9"), "no overflow near i64's limit");

        // A source that is not optional must be there, as the kubelet requires.
        let missing: Container = serde_json::from_value(json!({"name": "app", "image": "x",
            "envFrom": [{"secretRef": {"name": "nope"}}]}))
        .unwrap();
        let error = environment(&core, &ctx, &missing).await.unwrap_err();
        assert_eq!(error, LaunchError::Config("secret \"nope\" not found".into()));
        let keyless: Container = serde_json::from_value(json!({"name": "app", "image": "x",
            "env": [{"name": "K", "valueFrom":
                {"configMapKeyRef": {"name": "settings", "key": "nokey"}}}]}))
        .unwrap();
        let error = environment(&core, &ctx, &keyless).await.unwrap_err();
        let message = "couldn't find key nokey in ConfigMap default/settings";
        assert_eq!(error, LaunchError::Config(message.into()));
    }

    #[test]
    fn services_become_variables() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "redis-master"},
            "spec": {"clusterIP": "127.96.0.9", "ports": [{"name": "db", "port": 6379}]}
        }))
        .unwrap();
        let vars = service_variables(&service);
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("REDIS_MASTER_SERVICE_HOST"), Some("127.96.0.9"));
        assert_eq!(get("REDIS_MASTER_SERVICE_PORT"), Some("6379"));
        assert_eq!(get("REDIS_MASTER_SERVICE_PORT_DB"), Some("6379"));
        assert_eq!(get("REDIS_MASTER_PORT"), Some("tcp://127.96.0.9:6379"));
        assert_eq!(get("REDIS_MASTER_PORT_6379_TCP_ADDR"), Some("127.96.0.9"));
    }
}
