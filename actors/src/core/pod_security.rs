//! The PodSecurity admission (Kubernetes' built-in plugin, on by default): a namespace's
//! `pod-security.kubernetes.io/{enforce,audit,warn}` labels (and their `-version`s) choose a
//! Pod Security Standard for its pods, `privileged`, `baseline` or `restricted`. A pod that
//! breaks the `enforce` level is refused (403); one that breaks the `warn` level is admitted
//! with a warning, and so are workloads (replication controllers, pod templates) whose pod
//! template breaks either. The checks are those of the standards' latest version, whatever
//! version a label names.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::model::FieldError;

/// The labels' prefix.
const PREFIX: &str = "pod-security.kubernetes.io/";

/// A Pod Security Standard, least to most restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    fn parse(text: &str) -> Option<Level> {
        match text {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A level at a version (`latest` or `v1.N`), as a label pair sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standard {
    pub level: Level,
    pub version: String,
}

impl Standard {
    /// `restricted:latest`, as its messages name it.
    pub fn label(&self) -> String {
        format!("{}:{}", self.level.name(), self.version)
    }
}

/// What a namespace's labels ask of its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub enforce: Standard,
    pub audit: Standard,
    pub warn: Standard,
}

impl Policy {
    /// The policy `labels` set, with the errors of the labels that set none Kubernetes takes
    /// (`metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: ...`). A mode
    /// without a label is privileged; an invalid enforce label enforces `restricted:latest`,
    /// as Kubernetes denies by default.
    pub fn of<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
    ) -> (Policy, Vec<FieldError>) {
        let mut errors = Vec::new();
        let find = |key: &str| labels.clone().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        // Each mode's level and version, each read apart: a bad level is restricted for
        // enforce (denied by default) and privileged for audit and warn (they fail open), a
        // bad version is `latest`.
        let mut read = |mode: &str| {
            let level_key = format!("{PREFIX}{mode}");
            let version_key = format!("{level_key}-version");
            let level_label = find(&level_key);
            let level = match level_label {
                None => Level::Privileged,
                Some(text) => Level::parse(text).unwrap_or_else(|| {
                    let why = "must be one of privileged, baseline, restricted";
                    errors.push(invalid(&level_key, text, why));
                    if mode == "enforce" {
                        Level::Restricted
                    } else {
                        Level::Privileged
                    }
                }),
            };
            let version_label = find(&version_key);
            let version = match version_label {
                Some(text) if valid_version(text) => text.to_string(),
                Some(text) => {
                    errors.push(invalid(&version_key, text, "must be \"latest\" or \"v1.x\""));
                    "latest".to_string()
                }
                None => "latest".to_string(),
            };
            let level_valid = level_label.is_some_and(|text| Level::parse(text).is_some());
            (
                Standard { level, version },
                level_label.is_some(),
                level_valid,
                version_label.is_some(),
            )
        };
        let (enforce, _, enforce_set, _) = read("enforce");
        let (audit, _, _, _) = read("audit");
        let (mut warn, warn_level_named, _, warn_version_named) = read("warn");
        // Warn defaults to a stricter enforced level (and its version, unless it names one).
        if !warn_level_named && enforce_set && enforce.level > warn.level {
            warn.level = enforce.level;
            if !warn_version_named {
                warn.version.clone_from(&enforce.version);
            }
        }
        (Policy { enforce, audit, warn }, errors)
    }
}

fn invalid(key: &str, value: &str, why: &str) -> FieldError {
    FieldError::invalid(format!("metadata.labels[{key}]"), value, why)
}

/// `latest` or `v1.N` (no leading zero).
fn valid_version(text: &str) -> bool {
    if text == "latest" {
        return true;
    }
    let Some(minor) = text.strip_prefix("v1.") else { return false };
    !minor.is_empty()
        && minor.bytes().all(|b| b.is_ascii_digit())
        && (minor == "0" || !minor.starts_with('0'))
        && minor.len() <= 9
}

/// Whether `labels` name a pod security label at all.
pub fn names_any<'a>(mut keys: impl Iterator<Item = &'a str>) -> bool {
    keys.any(|key| key.starts_with(PREFIX))
}

/// Whether a pod's update is one the admission checks again, as Kubernetes': one that
/// changes a container's image or adds a container (an ephemeral one, say), or changes the
/// pod's or a container's seccomp annotation. Its other changes (labels, other annotations,
/// tolerations, ...) cannot make it less secure.
pub fn significant_update(old: &Value, new: &Value) -> bool {
    let annotation = |pod: &Value, key: &str| pod["metadata"]["annotations"][key].clone();
    if annotation(old, SECCOMP_POD_ANNOTATION) != annotation(new, SECCOMP_POD_ANNOTATION) {
        return true;
    }
    ["initContainers", "containers", "ephemeralContainers"].iter().any(|list| {
        let containers = |pod: &Value| pod["spec"][*list].as_array().map_or(0, Vec::len);
        let (before, after) = (&old["spec"][*list], &new["spec"][*list]);
        containers(old) != containers(new)
            || (0..containers(new)).any(|i| {
                let name = after[i]["name"].as_str().unwrap_or("");
                let seccomp = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{name}");
                before[i]["name"] != after[i]["name"]
                    || before[i]["image"] != after[i]["image"]
                    || annotation(old, &seccomp) != annotation(new, &seccomp)
            })
    })
}

/// The pod's and its containers' seccomp annotations (from before `seccompProfile`), whose
/// change is checked again.
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// The message of a pod `standard` refuses: `violates PodSecurity "restricted:latest": ...`.
pub fn violation_message(standard: &Standard, violations: &[String]) -> String {
    format!("violates PodSecurity {:?}: {}", standard.label(), violations.join(", "))
}

/// The warning of a pod or template `standard` would refuse.
pub fn warning(standard: &Standard, violations: &[String]) -> String {
    format!("would violate PodSecurity {:?}: {}", standard.label(), violations.join(", "))
}

/// The reasons alone of what `pod` breaks of `level`, in one line (`privileged,
/// seccompProfile`), as Kubernetes sums up a pod for a namespace's new standard.
pub fn violated_reasons(pod: &Value, level: Level) -> String {
    let found = violations(pod, level);
    let reasons = found.iter().map(|v| v.split_once(" (").map_or(v.as_str(), |(reason, _)| reason));
    reasons.collect::<Vec<_>>().join(", ")
}

/// What `pod` (a Pod, or a template's `{metadata, spec}`) breaks of `level`, each as
/// Kubernetes names it: `reason (detail)`, in its checks' order.
pub fn violations(pod: &Value, level: Level) -> Vec<String> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let spec = &pod["spec"];
    let pod_context = &spec["securityContext"];
    let annotations = pod.pointer("/metadata/annotations").and_then(Value::as_object);
    let containers: Vec<&Value> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| spec[*list].as_array().into_iter().flatten())
        .collect();
    let name = |c: &Value| c["name"].as_str().unwrap_or_default().to_string();
    let context = |c: &Value, field: &str| c["securityContext"][field].clone();
    let mut found: Vec<(String, String)> = Vec::new();
    let mut note = |reason: &str, detail: String| found.push((reason.to_string(), detail));
    let restricted = level == Level::Restricted;

    // AppArmor: only the runtime's default or a profile of the node's.
    let allowed_type = |ctx: &Value| {
        let kind = ctx["appArmorProfile"]["type"].as_str();
        ctx["appArmorProfile"].is_null() || matches!(kind, Some("RuntimeDefault" | "Localhost"))
    };
    let mut bad_values = BTreeSet::new();
    let mut setters = Vec::new();
    if !allowed_type(pod_context) {
        setters.push("pod".to_string());
        bad_values.insert(
            pod_context["appArmorProfile"]["type"].as_str().unwrap_or_default().to_string(),
        );
    }
    let mut bad_containers = Vec::new();
    for c in &containers {
        if !allowed_type(&c["securityContext"]) {
            bad_containers.push(name(c));
            let kind = c["securityContext"]["appArmorProfile"]["type"].as_str();
            bad_values.insert(kind.unwrap_or_default().to_string());
        }
    }
    if !bad_containers.is_empty() {
        setters.push(containers_named(&bad_containers));
    }
    let mut annotated: Vec<String> = annotations
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| {
            let value = value.as_str().unwrap_or_default();
            let allowed =
                value.is_empty() || value == "runtime/default" || value.starts_with("localhost/");
            (key.starts_with("container.apparmor.security.beta.kubernetes.io/") && !allowed)
                .then(|| format!("{key}={value:?}"))
        })
        .collect();
    let mut bad_values: Vec<String> = bad_values.into_iter().collect();
    if !annotated.is_empty() {
        annotated.sort();
        setters.push(plural("annotation", "annotations", annotated.len()).to_string());
        bad_values.extend(annotated);
    }
    if !setters.is_empty() {
        let reason =
            plural("forbidden AppArmor profile", "forbidden AppArmor profiles", bad_values.len());
        let setters = setters.join(" and ");
        note(
            reason,
            format!("{setters} must not set AppArmor profile type to {}", join_quoted(&bad_values)),
        );
    }

    // Capabilities beyond the runtime's defaults (baseline; restricted checks them below).
    if !restricted {
        let (bad, added) =
            added_capabilities(&containers, |cap| !BASELINE_CAPABILITIES.contains(&cap));
        if !bad.is_empty() {
            note(
                "non-default capabilities",
                format!(
                    "{} must not include {} in securityContext.capabilities.add",
                    containers_named(&bad),
                    join_quoted(&added)
                ),
            );
        }
    }

    // Host namespaces.
    let shared: Vec<&str> = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .iter()
    .filter(|(field, _)| spec[*field] == true)
    .map(|(_, text)| *text)
    .collect();
    if !shared.is_empty() {
        note("host namespaces", shared.join(", "));
    }

    // hostPath volumes.
    let volumes = spec["volumes"].as_array().map_or(&[][..], Vec::as_slice);
    let host_paths: Vec<String> = volumes
        .iter()
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    // (Restricted's volume types name them instead.)
    if !host_paths.is_empty() && !restricted {
        note(
            "hostPath volumes",
            format!(
                "{} {}",
                plural("volume", "volumes", host_paths.len()),
                join_quoted(&host_paths)
            ),
        );
    }

    // Host ports.
    let mut port_users = Vec::new();
    let mut ports = Vec::new();
    for c in &containers {
        let mut uses = false;
        for port in c["ports"].as_array().into_iter().flatten() {
            if let Some(host_port) = port["hostPort"].as_i64().filter(|p| *p != 0) {
                uses = true;
                if !ports.contains(&host_port.to_string()) {
                    ports.push(host_port.to_string());
                }
            }
        }
        if uses {
            port_users.push(name(c));
        }
    }
    ports.sort();
    if !port_users.is_empty() {
        note(
            "hostPort",
            format!(
                "{} {} {} {}",
                containers_named(&port_users),
                plural("uses", "use", port_users.len()),
                plural("hostPort", "hostPorts", ports.len()),
                ports.join(", ")
            ),
        );
    }

    // Privileged containers.
    let privileged: Vec<String> =
        containers.iter().filter(|c| context(c, "privileged") == true).map(|c| name(c)).collect();
    if !privileged.is_empty() {
        note(
            "privileged",
            format!(
                "{} must not set securityContext.privileged=true",
                containers_named(&privileged)
            ),
        );
    }

    // /proc mounts.
    let mut proc_mounts = Vec::new();
    let mut mount_types = Vec::new();
    for c in &containers {
        if let Some(kind) = context(c, "procMount").as_str().filter(|k| *k != "Default") {
            proc_mounts.push(name(c));
            if !mount_types.contains(&kind.to_string()) {
                mount_types.push(kind.to_string());
            }
        }
    }
    mount_types.sort();
    if !proc_mounts.is_empty() {
        note(
            "procMount",
            format!(
                "{} must not set securityContext.procMount to {}",
                containers_named(&proc_mounts),
                join_quoted(&mount_types)
            ),
        );
    }

    // SELinux: only the container types, no user or role.
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut bad_selinux = |ctx: &Value| {
        let options = &ctx["seLinuxOptions"];
        if options.is_null() {
            return false;
        }
        let kind = options["type"].as_str().unwrap_or_default();
        let bad_type = !kind.is_empty() && !SELINUX_TYPES.contains(&kind);
        if bad_type {
            bad_types.insert(kind.to_string());
        }
        let user = options["user"].as_str().is_some_and(|v| !v.is_empty());
        let role = options["role"].as_str().is_some_and(|v| !v.is_empty());
        set_user |= user;
        set_role |= role;
        bad_type || user || role
    };
    let selinux_pod = bad_selinux(pod_context);
    let selinux_holders: Vec<String> =
        containers.iter().filter(|c| bad_selinux(&c["securityContext"])).map(|c| name(c)).collect();
    if selinux_pod || !selinux_holders.is_empty() {
        let who = pod_and_containers(selinux_pod, &selinux_holders);
        let bad_types: Vec<String> = bad_types.into_iter().collect();
        let mut what = Vec::new();
        if !bad_types.is_empty() {
            what.push(format!(
                "{} {}",
                plural("type", "types", bad_types.len()),
                join_quoted(&bad_types)
            ));
        }
        if set_user {
            what.push("user may not be set".to_string());
        }
        if set_role {
            what.push("role may not be set".to_string());
        }
        note(
            "seLinuxOptions",
            format!("{who} set forbidden securityContext.seLinuxOptions: {}", what.join("; ")),
        );
    }

    // Seccomp: never Unconfined (baseline; restricted checks it below, with more).
    let seccomp_type = |ctx: &Value| ctx["seccompProfile"]["type"].as_str().map(str::to_string);
    let unconfined_seccomp: Vec<String> = containers
        .iter()
        .filter(|c| seccomp_type(&c["securityContext"]).as_deref() == Some("Unconfined"))
        .map(|c| name(c))
        .collect();
    let pod_unconfined = seccomp_type(pod_context).as_deref() == Some("Unconfined");
    if !restricted && (pod_unconfined || !unconfined_seccomp.is_empty()) {
        let who = pod_and_containers(pod_unconfined, &unconfined_seccomp);
        note(
            "seccompProfile",
            format!("{who} must not set securityContext.seccompProfile.type to \"Unconfined\""),
        );
    }

    // Sysctls: only the safe set.
    let forbidden_sysctls: Vec<String> = pod_context["sysctls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .filter(|name| !crate::model::sysctl::SAFE.contains(name))
        .map(str::to_string)
        .collect();
    if !forbidden_sysctls.is_empty() {
        note("forbidden sysctls", forbidden_sysctls.join(", "));
    }

    // Windows host processes.
    let host_process = |ctx: &Value| ctx["windowsOptions"]["hostProcess"] == true;
    let host_processes: Vec<String> = containers
        .iter()
        .filter(|c| host_process(&c["securityContext"]))
        .map(|c| name(c))
        .collect();
    if host_process(pod_context) || !host_processes.is_empty() {
        let who = pod_and_containers(host_process(pod_context), &host_processes);
        note(
            "hostProcess",
            format!("{who} must not set securityContext.windowsOptions.hostProcess=true"),
        );
    }

    if restricted {
        restricted_violations(spec, &containers, &mut note);
    }
    found
        .into_iter()
        .map(
            |(reason, detail)| {
                if detail.is_empty() {
                    reason
                } else {
                    format!("{reason} ({detail})")
                }
            },
        )
        .collect()
}

/// The checks the restricted standard adds.
fn restricted_violations(spec: &Value, containers: &[&Value], note: &mut impl FnMut(&str, String)) {
    let name = |c: &Value| c["name"].as_str().unwrap_or_default().to_string();
    let pod_context = &spec["securityContext"];
    // A Windows pod has none of these Linux settings to make.
    let windows = spec["os"]["name"] == "windows";

    let escalating: Vec<String> = containers
        .iter()
        .filter(|c| c["securityContext"]["allowPrivilegeEscalation"] != false)
        .map(|c| name(c))
        .collect();
    if !escalating.is_empty() && !windows {
        note(
            "allowPrivilegeEscalation != false",
            format!(
                "{} must set securityContext.allowPrivilegeEscalation=false",
                containers_named(&escalating)
            ),
        );
    }

    // Capabilities: every one dropped, only NET_BIND_SERVICE added back.
    let not_dropping: Vec<String> = containers
        .iter()
        .filter(|c| {
            let drop = c["securityContext"]["capabilities"]["drop"].as_array();
            !drop.into_iter().flatten().any(|cap| cap == "ALL")
        })
        .map(|c| name(c))
        .collect();
    let (adding, added) = added_capabilities(containers, |cap| cap != "NET_BIND_SERVICE");
    let mut details = Vec::new();
    if !not_dropping.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&not_dropping)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quoted(&added)
        ));
    }
    if !details.is_empty() && !windows {
        note("unrestricted capabilities", details.join("; "));
    }

    // Volume types.
    let mut restricted_volumes = Vec::new();
    let mut kinds = BTreeSet::new();
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        let Some(fields) = volume.as_object() else { continue };
        let kind =
            fields.iter().find(|(k, v)| *k != "name" && !v.is_null()).map(|(k, _)| k.as_str());
        if let Some(kind) = kind.filter(|k| !ALLOWED_VOLUME_TYPES.contains(k)) {
            restricted_volumes.push(name(volume));
            kinds.insert(kind.to_string());
        }
    }
    if !restricted_volumes.is_empty() {
        let kinds: Vec<String> = kinds.into_iter().collect();
        note(
            "restricted volume types",
            format!(
                "{} {} {} {} {}",
                plural("volume", "volumes", restricted_volumes.len()),
                join_quoted(&restricted_volumes),
                plural("uses", "use", restricted_volumes.len()),
                plural("restricted volume type", "restricted volume types", kinds.len()),
                join_quoted(&kinds)
            ),
        );
    }

    // Non-root: runAsNonRoot true for the pod or every container, false nowhere.
    let non_root = |ctx: &Value| ctx["runAsNonRoot"].as_bool();
    if let Some(detail) = explicit_or_implicit(
        containers,
        non_root(pod_context),
        |c| non_root(&c["securityContext"]),
        "must not set securityContext.runAsNonRoot=false".to_string(),
        "must set securityContext.runAsNonRoot=true",
    ) {
        note("runAsNonRoot != true", detail);
    }

    // Not user 0.
    let root_pod = pod_context["runAsUser"] == 0;
    let root_containers: Vec<String> = containers
        .iter()
        .filter(|c| c["securityContext"]["runAsUser"] == 0)
        .map(|c| name(c))
        .collect();
    if root_pod || !root_containers.is_empty() {
        let who = pod_and_containers(root_pod, &root_containers);
        note("runAsUser=0", format!("{who} must not set runAsUser=0"));
    }

    // Seccomp: RuntimeDefault or Localhost, for the pod or every container.
    if !windows {
        let kind = |ctx: &Value| ctx["seccompProfile"]["type"].as_str().map(str::to_string);
        let allowed = |t: &str| t == "RuntimeDefault" || t == "Localhost";
        let judged = |ctx: &Value| kind(ctx).map(|t| allowed(&t));
        let mut bad: Vec<String> = std::iter::once(pod_context)
            .chain(containers.iter().map(|c| &c["securityContext"]))
            .filter_map(kind)
            .filter(|t| !allowed(t))
            .collect();
        bad.sort();
        bad.dedup();
        let refused =
            format!("must not set securityContext.seccompProfile.type to {}", join_quoted(&bad));
        if let Some(detail) = explicit_or_implicit(
            containers,
            judged(pod_context),
            |c| judged(&c["securityContext"]),
            refused,
            "must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
        ) {
            note("seccompProfile", detail);
        }
    }
}

/// A setting the pod or each container must make right (runAsNonRoot, seccompProfile): the
/// pod and the containers that make it wrong (`judged` false) are named first; only when none
/// does, the containers that leave it unset while the pod does not make it right (`pod or
/// container "a" must ...`).
fn explicit_or_implicit(
    containers: &[&Value],
    pod: Option<bool>,
    judged: impl Fn(&Value) -> Option<bool>,
    refused: String,
    required: &str,
) -> Option<String> {
    let name = |c: &&Value| c["name"].as_str().unwrap_or_default().to_string();
    let mut setters = Vec::new();
    if pod == Some(false) {
        setters.push("pod".to_string());
    }
    let explicit: Vec<String> =
        containers.iter().filter(|c| judged(c) == Some(false)).map(name).collect();
    if !explicit.is_empty() {
        setters.push(containers_named(&explicit));
    }
    if !setters.is_empty() {
        return Some(format!("{} {refused}", setters.join(" and ")));
    }
    if pod == Some(true) {
        return None;
    }
    let implicit: Vec<String> =
        containers.iter().filter(|c| judged(c).is_none()).map(name).collect();
    (!implicit.is_empty()).then(|| format!("pod or {} {required}", containers_named(&implicit)))
}

/// The containers that add a capability `forbidden` says yes to, and those capabilities
/// (each once, sorted).
fn added_capabilities(
    containers: &[&Value],
    forbidden: impl Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let mut holders = Vec::new();
    let mut added = BTreeSet::new();
    for c in containers {
        let adds = c["securityContext"]["capabilities"]["add"].as_array();
        let bad: Vec<&str> = adds
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|cap| forbidden(cap))
            .collect();
        if !bad.is_empty() {
            holders.push(c["name"].as_str().unwrap_or_default().to_string());
            added.extend(bad.into_iter().map(str::to_string));
        }
    }
    (holders, added.into_iter().collect())
}

/// `pod`, `container "a"`, or `pod and containers "a", "b"`.
fn pod_and_containers(pod: bool, containers: &[String]) -> String {
    let listed = (!containers.is_empty()).then(|| containers_named(containers));
    match (pod, listed) {
        (true, Some(listed)) => format!("pod and {listed}"),
        (true, None) => "pod".into(),
        (false, Some(listed)) => listed,
        (false, None) => String::new(),
    }
}

/// `container "a"` or `containers "a", "b"`.
fn containers_named(names: &[String]) -> String {
    format!("{} {}", plural("container", "containers", names.len()), join_quoted(names))
}

fn plural<'a>(one: &'a str, many: &'a str, count: usize) -> &'a str {
    if count == 1 {
        one
    } else {
        many
    }
}

fn join_quoted(items: &[String]) -> String {
    // Go's joinQuote: quoted, nothing escaped.
    items.iter().map(|item| format!("\"{item}\"")).collect::<Vec<_>>().join(", ")
}

/// The capabilities a container runtime grants by default, which baseline lets a container
/// add back.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The SELinux types baseline allows.
const SELINUX_TYPES: [&str; 4] =
    ["container_t", "container_init_t", "container_kvm_t", "container_engine_t"];

/// The volume types restricted allows.
const ALLOWED_VOLUME_TYPES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn pairs(labels: &BTreeMap<String, String>) -> impl Iterator<Item = (&str, &str)> + Clone {
        labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string())).collect()
    }

    #[test]
    fn labels_choose_each_mode_s_standard_and_bad_ones_are_named() {
        let (policy, errors) = Policy::of(pairs(&labels(&[
            ("enforce", "baseline"),
            ("warn", "restricted"),
            ("warn-version", "v1.30"),
        ])));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(policy.enforce.label(), "baseline:latest");
        assert_eq!(policy.warn.label(), "restricted:v1.30");
        assert_eq!(policy.audit.label(), "privileged:latest");
        let (policy, errors) =
            Policy::of(pairs(&labels(&[("enforce", "bogus"), ("audit-version", "v1.05")])));
        assert_eq!(policy.enforce.label(), "restricted:latest", "denied by default");
        assert_eq!(policy.audit.level, Level::Privileged);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]",
                "metadata.labels[pod-security.kubernetes.io/audit-version]"
            ]
        );
        assert!(
            errors[0].message.contains("must be one of privileged, baseline, restricted"),
            "{:?}",
            errors[0]
        );
        assert!(errors[1].message.contains("must be \"latest\" or \"v1.x\""), "{:?}", errors[1]);
        assert_eq!(policy.warn.level, Level::Privileged, "a bad enforce level sets no warn level");
        // Warn follows a stricter enforced level, and its version unless it names one; a bad
        // version is latest, the level kept.
        let (policy, _) =
            Policy::of(pairs(&labels(&[("enforce", "baseline"), ("enforce-version", "v1.31")])));
        assert_eq!(policy.warn.label(), "baseline:v1.31");
        let (policy, _) = Policy::of(pairs(&labels(&[
            ("enforce", "baseline"),
            ("enforce-version", "x"),
            ("warn-version", "v1.30"),
        ])));
        assert_eq!(
            (policy.enforce.label(), policy.warn.label()),
            ("baseline:latest".into(), "baseline:v1.30".into())
        );
    }

    #[test]
    fn a_privileged_container_breaks_baseline_and_restricted_asks_more() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "priv", "image": "x", "securityContext": {"privileged": true}}]}});
        assert!(violations(&pod, Level::Privileged).is_empty());
        assert_eq!(
            violations(&pod, Level::Baseline),
            ["privileged (container \"priv\" must not set securityContext.privileged=true)"]
        );
        let message = violation_message(
            &Standard { level: Level::Restricted, version: "latest".into() },
            &violations(&pod, Level::Restricted),
        );
        assert_eq!(
            message,
            "violates PodSecurity \"restricted:latest\": privileged (container \"priv\" must not set \
             securityContext.privileged=true), allowPrivilegeEscalation != false (container \"priv\" \
             must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities \
             (container \"priv\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot \
             != true (pod or container \"priv\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"priv\" must set securityContext.seccompProfile.type \
             to \"RuntimeDefault\" or \"Localhost\")"
        );
    }

    #[test]
    fn image_container_and_seccomp_annotation_changes_are_significant() {
        let pod = json!({"metadata": {"annotations": {"note": "a"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        let with = |pointer: &str, value: Value| {
            let mut changed = pod.clone();
            *changed.pointer_mut(pointer).unwrap() = value;
            changed
        };
        assert!(!significant_update(&pod, &with("/metadata/annotations/note", json!("b"))));
        assert!(significant_update(&pod, &with("/spec/containers/0/image", json!("y"))));
        let annotated =
            |key: &str| with("/metadata/annotations", json!({"note": "a", key: "unconfined"}));
        assert!(significant_update(&pod, &annotated("seccomp.security.alpha.kubernetes.io/pod")));
        let container_key = "container.seccomp.security.alpha.kubernetes.io/c";
        assert!(significant_update(&pod, &annotated(container_key)));
        let other = "container.seccomp.security.alpha.kubernetes.io/other";
        assert!(!significant_update(&pod, &annotated(other)));
    }

    #[test]
    fn a_pod_written_for_restricted_passes_it() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}], "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}});
        assert!(
            violations(&pod, Level::Restricted).is_empty(),
            "{:?}",
            violations(&pod, Level::Restricted)
        );
    }

    #[test]
    fn settings_made_wrong_are_named_before_settings_left_out() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "securityContext": {"runAsNonRoot": false, "seLinuxOptions": {"type": "spc_t", "user": "u"}},
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [
                {"name": "a", "image": "x", "securityContext": {"runAsNonRoot": false,
                    "seccompProfile": {"type": "Unconfined"}}},
                {"name": "b", "image": "x"}]}});
        let found = violations(&pod, Level::Restricted);
        let reason = |r: &str| found.iter().find(|v| v.starts_with(r)).cloned().unwrap_or_default();
        assert_eq!(reason("seLinuxOptions"), "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set)");
        assert_eq!(reason("runAsNonRoot"), "runAsNonRoot != true (pod and container \"a\" must not set securityContext.runAsNonRoot=false)");
        assert_eq!(reason("seccompProfile"), "seccompProfile (container \"a\" must not set securityContext.seccompProfile.type to \"Unconfined\")");
        assert!(!found.iter().any(|v| v.starts_with("hostPath volumes")), "{found:?}");
        let baseline = violations(&pod, Level::Baseline);
        let order: Vec<&str> = baseline.iter().map(|v| v.split(" (").next().unwrap()).collect();
        assert_eq!(order, ["hostPath volumes", "seLinuxOptions", "seccompProfile"]);
        // A Windows pod is spared the Linux-only settings.
        let windows = json!({"spec": {"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c", "image": "x"}]}});
        assert!(
            violations(&windows, Level::Restricted).is_empty(),
            "{:?}",
            violations(&windows, Level::Restricted)
        );
    }

    #[test]
    fn baseline_names_host_access_and_unsafe_settings() {
        let pod = json!({"metadata": {"name": "p", "annotations": {
                "container.apparmor.security.beta.kubernetes.io/a": "unconfined"}},
            "spec": {"hostNetwork": true, "hostPID": true,
                "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_syncookies", "value": "1"}]},
                "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                "containers": [
                    {"name": "a", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}],
                     "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_ADMIN"]}}},
                    {"name": "b", "image": "x", "ports": [{"containerPort": 81, "hostPort": 8081}],
                     "securityContext": {"procMount": "Unmasked", "seccompProfile": {"type": "Unconfined"}}}]}});
        assert_eq!(
            violations(&pod, Level::Baseline),
            [
                "forbidden AppArmor profile (annotation must not set AppArmor profile type to \"container.apparmor.security.beta.kubernetes.io/a=\"unconfined\"\")",
                "non-default capabilities (container \"a\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add)",
                "host namespaces (hostNetwork=true, hostPID=true)",
                "hostPath volumes (volume \"root\")",
                "hostPort (containers \"a\", \"b\" use hostPorts 8080, 8081)",
                "procMount (container \"b\" must not set securityContext.procMount to \"Unmasked\")",
                "seccompProfile (container \"b\" must not set securityContext.seccompProfile.type to \"Unconfined\")",
                "forbidden sysctls (kernel.msgmax)",
            ]
        );
        let restricted = violations(&pod, Level::Restricted);
        assert!(restricted.contains(&"restricted volume types (volume \"root\" uses restricted volume type \"hostPath\")".to_string()), "{restricted:?}");
        assert!(
            !restricted.iter().any(|v| v.starts_with("non-default capabilities")),
            "restricted's own check replaces it"
        );
    }
}
