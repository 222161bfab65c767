//! The secure port, driven by kubectl over TLS (verified against the self-signed certificate
//! the server made in its data dir): users from the token file, the basic auth file and
//! client certificates signed by the client CA; an ABAC policy deciding what each may do, in
//! Kubernetes' words when it may not; anonymous requests where a policy lets them; every
//! request in the audit log. The insecure port keeps answering without credentials.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::util::{free_port, Server};

const POLICIES: &[&str] = &[
    r#"{"user": "alice", "namespace": "*", "resource": "*", "apiGroup": "*", "nonResourcePath": "*"}"#,
    r#"{"user": "bob", "namespace": "default", "resource": "*", "apiGroup": "*", "readonly": true}"#,
    r#"{"group": "system:authenticated", "nonResourcePath": "*", "readonly": true}"#,
    r#"{"group": "system:unauthenticated", "nonResourcePath": "/healthz", "readonly": true}"#,
    // What RBAC's system:basic-user grants: asking who one is, and what one may do.
    r#"{"group": "system:authenticated", "namespace": "*", "resource": "selfsubjectreviews", "apiGroup": "authentication.k8s.io"}"#,
    r#"{"group": "system:authenticated", "namespace": "*", "resource": "selfsubjectaccessreviews", "apiGroup": "authorization.k8s.io"}"#,
    r#"{"group": "system:authenticated", "namespace": "*", "resource": "selfsubjectrulesreviews", "apiGroup": "authorization.k8s.io"}"#,
    r#"{"group": "devs", "namespace": "*", "resource": "configmaps", "apiGroup": ""}"#,
];

/// A CA, and a client certificate it signed for `dave` in group `devs` (PEM: CA, cert, key).
fn client_certificate() -> (String, String, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "test client CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "dave");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "devs");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = params.signed_by(&key, &ca, &ca_key).unwrap();
    (ca.pem(), certificate.pem(), key.serialize_pem())
}

/// kubectl with a kubeconfig for `https://127.0.0.1:{port}` and the user `user` (YAML fields).
struct SecureKubectl {
    dir: tempfile::TempDir,
}

impl SecureKubectl {
    fn new(port: u16, ca: &Path, user: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {}\n\
             contexts:\n- name: k\n  context:\n    cluster: k\n    user: u\n    namespace: default\n\
             current-context: k\nusers:\n- name: u\n  user: {user}\n",
            ca.display()
        );
        std::fs::write(dir.path().join("config"), config).unwrap();
        SecureKubectl { dir }
    }

    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.dir.path().join("config"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .env("HOME", self.dir.path())
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {args:?}: {out}{err}");
        out
    }

    fn refused(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(!ok, "kubectl {args:?} was let through: {out}");
        err
    }
}

/// `GET https://127.0.0.1:{port}{path}` with curl (verified against `ca`), as `token`'s user
/// or with no credentials: the answer's body, a space and its code.
fn curl(port: u16, ca: &Path, token: Option<&str>, path: &str) -> String {
    let mut command = std::process::Command::new("curl");
    command.args(["-s", "-w", " %{http_code}", "--cacert"]).arg(ca);
    if let Some(token) = token {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = command.arg(format!("https://127.0.0.1:{port}{path}")).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn whoami(kubectl: &SecureKubectl) -> Value {
    serde_json::from_str(&kubectl.ok(&["auth", "whoami", "-o", "json"])).unwrap()
}

#[test]
fn the_secure_port_authenticates_authorizes_and_audits() {
    let files = tempfile::tempdir().unwrap();
    let write = |name: &str, content: String| -> PathBuf {
        let path = files.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    };
    let tokens =
        write("tokens.csv", "alice-token,alice,1001,\"admins\"\nbob-token,bob,1002\n".into());
    let basic = write("basic.csv", "carol-pw,carol,1003,readers\n".into());
    let policy_lines: Vec<String> = POLICIES
        .iter()
        .map(|spec| format!(r#"{{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {spec}}}"#))
        .collect();
    let policy = write("policy.jsonl", policy_lines.join("\n"));
    let (ca, cert, key) = client_certificate();
    let client_ca = write("client-ca.crt", ca);
    let (cert, key) = (write("dave.crt", cert), write("dave.key", key));
    let audit = files.path().join("audit.log");
    let port = free_port();
    let env = [
        ("KPLANE_SERVER__SECURE_PORT", port.to_string()),
        ("KPLANE_SERVER__BIND_ADDRESS", "127.0.0.1".into()),
        ("KPLANE_SERVER__TOKEN_AUTH_FILE", tokens.display().to_string()),
        ("KPLANE_SERVER__BASIC_AUTH_FILE", basic.display().to_string()),
        ("KPLANE_SERVER__CLIENT_CA_FILE", client_ca.display().to_string()),
        ("KPLANE_SERVER__AUTHORIZATION_MODE", "ABAC".into()),
        ("KPLANE_SERVER__AUTHORIZATION_POLICY_FILE", policy.display().to_string()),
        ("KPLANE_SERVER__AUDIT_LOG_PATH", audit.display().to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start_with_env(&env);
    let server_ca = server.data.path().join("pki/apiserver.crt");
    assert!(server_ca.is_file(), "the self-signed certificate is in the data dir");
    let as_user = |user: &str| SecureKubectl::new(port, &server_ca, user);

    let alice = as_user("{token: alice-token}");
    assert!(alice.ok(&["get", "namespaces"]).contains("default"));
    alice.ok(&["create", "configmap", "from-alice", "--from-literal=a=b"]);
    let me = whoami(&alice);
    assert_eq!(me["status"]["userInfo"]["username"], "alice");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        serde_json::json!(["admins", "system:authenticated"])
    );

    let bob = as_user("{token: bob-token}");
    assert!(bob.ok(&["get", "configmaps"]).contains("from-alice"));
    let denied = bob.refused(&["create", "configmap", "from-bob", "--from-literal=a=b"]);
    assert!(denied.contains(r#"configmaps is forbidden: User "bob" cannot create resource "configmaps" in API group "" in the namespace "default": No policy matched."#), "{denied}");
    let denied = bob.refused(&["get", "pods", "-n", "kube-system"]);
    assert!(denied.contains(r#"User "bob" cannot list resource "pods" in API group "" in the namespace "kube-system""#), "{denied}");

    // kubectl auth can-i: the authorizer's answers.
    assert_eq!(bob.run(&["auth", "can-i", "list", "pods"]).1, "yes\n");
    let (allowed, answer, _) = bob.run(&["auth", "can-i", "create", "configmaps"]);
    assert_eq!((allowed, answer.as_str()), (false, "no - No policy matched.\n"));
    let elsewhere = bob.run(&["auth", "can-i", "get", "pods", "-n", "kube-system"]).1;
    assert!(elsewhere.starts_with("no"), "{elsewhere}");
    let rules = bob.ok(&["auth", "can-i", "--list"]);
    assert!(
        rules.lines().any(|l| l.starts_with("*.*") && l.contains("[get list watch]")),
        "{rules}"
    );

    let unknown = as_user("{token: nobodys-token}");
    let refused = unknown.refused(&["get", "namespaces"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");

    let carol = as_user("{username: carol, password: carol-pw}");
    assert_eq!(whoami(&carol)["status"]["userInfo"]["username"], "carol");
    let wrong = as_user("{username: carol, password: nope}");
    let refused = wrong.refused(&["auth", "whoami"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");

    let dave = as_user(&format!(
        "{{client-certificate: {}, client-key: {}}}",
        cert.display(),
        key.display()
    ));
    let me = whoami(&dave);
    assert_eq!(me["status"]["userInfo"]["username"], "dave");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        serde_json::json!(["devs", "system:authenticated"])
    );
    dave.ok(&["create", "configmap", "from-dave", "--from-literal=a=b"]);
    assert!(dave.refused(&["get", "pods"]).contains(r#"User "dave" cannot list resource "pods""#));
    assert!(dave.refused(&["get", "configmap", "nope"]).contains("NotFound"));

    // Without credentials (curl: kubectl would ask for a user name).
    let anonymous = |path: &str| curl(port, &server_ca, None, path);
    assert_eq!(anonymous("/healthz"), "ok 200");
    let denied = anonymous("/api");
    let expected =
        r#"forbidden: User \"system:anonymous\" cannot get path \"/api\": No policy matched."#;
    assert!(denied.ends_with(" 403") && denied.contains(expected), "{denied}");

    // The insecure port asks nothing.
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps/from-dave").0, 200);
    // Every response carries its request's audit ID (the one it sent, or a new one), which
    // the audit log records, and kube-apiserver's Cache-Control.
    let http = reqwest::blocking::Client::new();
    let traced = server.url("/api/v1/namespaces/default/configmaps/from-alice");
    let response = http.get(&traced).header("Audit-ID", "traced-1").send().unwrap();
    let header = |response: &reqwest::blocking::Response, name: &str| {
        response.headers().get(name).map(|v| v.to_str().unwrap().to_string())
    };
    assert_eq!(header(&response, "audit-id").as_deref(), Some("traced-1"));
    assert_eq!(header(&response, "cache-control").as_deref(), Some("no-cache, private"));
    let fresh = http.get(server.url("/api/v1/namespaces")).send().unwrap();
    let fresh = header(&fresh, "audit-id").expect("an audit ID");
    assert_eq!(uuid::Uuid::parse_str(&fresh).unwrap().get_version_num(), 4, "{fresh}");

    // A watch is logged as it starts and again as it ends, from where its proxies say.
    let watch = server.url("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1");
    let watched = http.get(watch).header("Audit-ID", "watched-1");
    let watched = watched.header("X-Forwarded-For", "10.1.2.3, junk").send().unwrap();
    assert_eq!(watched.status().as_u16(), 200);
    watched.text().unwrap();
    // A replace's object is referred to with its uid and resourceVersion.
    let (_, current) = server.get("/api/v1/namespaces/default/configmaps/from-alice");
    let replace = http.put(&traced).header("Audit-ID", "replaced-1").json(&current);
    assert_eq!(replace.send().unwrap().status().as_u16(), 200);

    let events: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let with_id = |id: &str| events.iter().filter(|e| e["auditID"] == id).collect::<Vec<_>>();
    let watched = with_id("watched-1");
    let stages: Vec<&Value> = watched.iter().map(|e| &e["stage"]).collect();
    assert_eq!(stages, [&json!("ResponseStarted"), &json!("ResponseComplete")], "{watched:?}");
    assert_eq!(watched[1]["sourceIPs"], json!(["10.1.2.3", "127.0.0.1"]), "{watched:?}");
    let replaced = with_id("replaced-1");
    let meta = &current["metadata"];
    assert_eq!(replaced[0]["objectRef"]["uid"], meta["uid"], "{replaced:?}");
    assert_eq!(replaced[0]["objectRef"]["resourceVersion"], meta["resourceVersion"]);
    let logged = |user: &str, verb: &str, code: u16| {
        events.iter().any(|e| {
            e["user"]["username"] == user
                && e["verb"] == verb
                && e["responseStatus"]["code"] == code
                && e["objectRef"]["resource"] == "configmaps"
        })
    };
    assert!(logged("alice", "create", 201), "alice's create");
    assert!(logged("bob", "create", 403), "bob's refused create");
    assert!(logged("dave", "create", 201), "dave's create");
    assert!(logged("system:unsecured", "get", 200), "the insecure port's read");
    assert!(events.iter().any(|e| e["auditID"] == "traced-1"), "the given audit ID is logged");
    let logged_ids: Vec<&str> = events.iter().filter_map(|e| e["auditID"].as_str()).collect();
    assert!(logged_ids.contains(&fresh.as_str()), "the response's audit ID is the log's");
    // Failed authentications (carol's wrong password, a bad token): logged with no user.
    let failed: Vec<&Value> =
        events.iter().filter(|e| e["responseStatus"]["code"] == 401).collect();
    let attempted = |method: &str| {
        let message = format!("Authentication failed, attempted: {method}");
        failed.iter().any(|e| e["responseStatus"]["message"] == message.as_str())
    };
    assert!(attempted("basic") && attempted("bearer"), "{failed:?}");
    for event in &failed {
        assert_eq!(event["user"], json!({}));
        assert_eq!(event["stage"], "ResponseStarted");
        assert!(event.get("annotations").is_none(), "{event}");
    }
    let refused = events
        .iter()
        .find(|e| e["user"]["username"] == "bob" && e["responseStatus"]["code"] == 403)
        .unwrap();
    // An error's event has the Status it was answered with, as kube-apiserver logs it.
    assert_eq!(refused["responseStatus"]["reason"], "Forbidden", "{refused}");
    assert_eq!(refused["responseStatus"]["status"], "Failure", "{refused}");
    let message = refused["responseStatus"]["message"].as_str().unwrap();
    assert!(message.contains(r#"User "bob" cannot create resource "configmaps""#), "{refused}");
    let missing = events.iter().find(|e| e["responseStatus"]["code"] == 404).unwrap();
    assert_eq!(missing["responseStatus"]["reason"], "NotFound", "{missing}");
    assert_eq!(missing["responseStatus"]["details"]["name"], "nope", "{missing}");
    // A create's object is named in its event (from its body: the path has no name).
    let created = events
        .iter()
        .find(|e| {
            e["user"]["username"] == "dave"
                && e["verb"] == "create"
                && e["objectRef"]["resource"] == "configmaps"
        })
        .unwrap();
    assert_eq!(created["objectRef"]["name"], "from-dave", "{created}");
    assert_eq!(created["responseStatus"], json!({"metadata": {}, "code": 201}), "{created}");
    assert_eq!(refused["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(refused["annotations"]["authorization.k8s.io/reason"], "No policy matched.");
    assert_eq!(refused["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(refused["sourceIPs"], serde_json::json!(["127.0.0.1"]));
}

/// Client certificates as kube-apiserver's x509 authenticator judges them: a version 1
/// certificate (what `openssl x509 -req` makes without extensions) signed by the client CA
/// names its user; one the CA did not sign still completes the handshake and is 401, unless a
/// bearer token names a user.
#[test]
fn client_certificates_are_judged_after_the_handshake() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path();
    let openssl = |args: &[&str]| {
        let out =
            std::process::Command::new("openssl").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=test CA",
    ]);
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "erin.key",
        "-out",
        "erin.csr",
        "-subj",
        "/CN=erin/O=devs",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "erin.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "erin.crt",
        "-days",
        "2",
    ]);
    let (_, stranger, stranger_key) = client_certificate();
    std::fs::write(dir.join("stranger.crt"), stranger).unwrap();
    std::fs::write(dir.join("stranger.key"), stranger_key).unwrap();
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, "root-token,root,1,system:masters\n").unwrap();
    let port = free_port();
    let env = [
        ("KPLANE_SERVER__SECURE_PORT", port.to_string()),
        ("KPLANE_SERVER__BIND_ADDRESS", "127.0.0.1".into()),
        ("KPLANE_SERVER__TOKEN_AUTH_FILE", tokens.display().to_string()),
        ("KPLANE_SERVER__CLIENT_CA_FILE", dir.join("ca.crt").display().to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start_with_env(&env);
    let server_ca = server.data.path().join("pki/apiserver.crt");
    let with_certificate = |name: &str| {
        let user = format!(
            "{{client-certificate: {}, client-key: {}}}",
            dir.join(format!("{name}.crt")).display(),
            dir.join(format!("{name}.key")).display()
        );
        SecureKubectl::new(port, &server_ca, &user)
    };
    let erin = whoami(&with_certificate("erin"));
    assert_eq!(erin["status"]["userInfo"]["username"], "erin", "{erin}");
    assert_eq!(erin["status"]["userInfo"]["groups"], json!(["devs", "system:authenticated"]));
    let refused = with_certificate("stranger").refused(&["get", "namespaces"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");
    // Over the same handshake, a token names its user.
    let curl = |extra: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-s", "-w", " %{http_code}", "--cacert"])
            .arg(&server_ca)
            .args(["--cert", "stranger.crt", "--key", "stranger.key"])
            .args(extra)
            .arg(format!("https://127.0.0.1:{port}/api/v1/namespaces/default"))
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(curl(&[]).ends_with(" 401"), "{}", curl(&[]));
    assert!(curl(&["-H", "Authorization: Bearer root-token"]).ends_with(" 200"));
}

/// A server with its secure port on (on a free port, which it answers with), nothing more.
fn secure_server() -> (Server, u16) {
    secure_server_with(&[])
}

/// A server with a secure port, and these settings besides.
fn secure_server_with(extra: &[(&str, &str)]) -> (Server, u16) {
    let port = free_port();
    let env = [
        ("KPLANE_SERVER__SECURE_PORT", port.to_string()),
        ("KPLANE_SERVER__BIND_ADDRESS", "127.0.0.1".into()),
    ];
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend_from_slice(extra);
    (Server::start_with_env(&env), port)
}

/// A server whose secure port knows `root` (of `system:masters`) and `bob` by their tokens,
/// under the default authorization (RBAC); kubectl as each.
fn rbac_server(files: &Path) -> (Server, u16, SecureKubectl, SecureKubectl) {
    let tokens = files.join("tokens.csv");
    std::fs::write(&tokens, "root-token,root,1,system:masters\nbob-token,bob,2\n").unwrap();
    let port = free_port();
    let env = [
        ("KPLANE_SERVER__SECURE_PORT", port.to_string()),
        ("KPLANE_SERVER__BIND_ADDRESS", "127.0.0.1".into()),
        ("KPLANE_SERVER__TOKEN_AUTH_FILE", tokens.display().to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start_with_env(&env);
    let server_ca = server.data.path().join("pki/apiserver.crt");
    let root = SecureKubectl::new(port, &server_ca, "{token: root-token}");
    let bob = SecureKubectl::new(port, &server_ca, "{token: bob-token}");
    (server, port, root, bob)
}

/// RBAC, the default mode: the bootstrap policy makes `system:masters` cluster-admin and lets
/// every authenticated user ask who they are; roles and bindings made with `kubectl create`
/// (protobuf bodies) grant what they say, in their namespace, and stop granting it when the
/// binding goes.
#[test]
fn rbac_roles_and_bindings_grant_what_they_say() {
    let files = tempfile::tempdir().unwrap();
    let (server, port, root, bob) = rbac_server(files.path());

    let roles = root.ok(&["get", "clusterroles"]);
    assert!(roles.contains("cluster-admin") && roles.contains("system:basic-user"), "{roles}");
    assert_eq!(whoami(&bob)["status"]["userInfo"]["username"], "bob");
    let denied = bob.refused(&["get", "pods"]);
    assert!(
        denied.contains(r#"pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default""#),
        "{denied}"
    );

    root.ok(&["create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods"]);
    root.ok(&["create", "rolebinding", "bob-reads-pods", "--role=pod-reader", "--user=bob"]);
    let bad = r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bad"}, "subjects": [{"kind": "Robot", "name": "r2"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Deployment", "name": "x"}}"#;
    let bad_file = files.path().join("bad.json");
    std::fs::write(&bad_file, bad).unwrap();
    let invalid = root.refused(&["create", "-f", bad_file.to_str().unwrap()]);
    assert!(
        invalid.contains(r#"roleRef.kind: Unsupported value: "Deployment""#)
            && invalid.contains(r#"subjects[0].kind: Unsupported value: "Robot""#),
        "{invalid}"
    );
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob may list pods", || {
        bob.run(&["get", "pods"]).0
    });
    assert_eq!(bob.run(&["auth", "can-i", "watch", "pods"]).1, "yes\n");
    assert_eq!(bob.run(&["auth", "can-i", "delete", "pods"]).1, "no\n");
    // An access review about bob is the authorizer's answer on the insecure port too.
    let about_bob = |verb: &str| {
        let review = json!({"apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview", "spec": {"user": "bob",
            "resourceAttributes": {"verb": verb, "resource": "pods", "namespace": "default"}}});
        let (code, answer) =
            server.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", &review);
        assert_eq!(code, 201, "{answer}");
        answer["status"].clone()
    };
    assert_eq!(about_bob("delete")["allowed"], false);
    let allowed = about_bob("list");
    assert_eq!(allowed["allowed"], true);
    assert!(allowed["reason"].as_str().unwrap_or("").contains("bob-reads-pods"), "{allowed}");
    // Why, as Kubernetes' RBAC says it: the review's reason names the binding.
    let review = r#"{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}}}"#;
    let review_file = files.path().join("review.json");
    std::fs::write(&review_file, review).unwrap();
    let answered: Value = serde_json::from_str(&bob.ok(&[
        "create",
        "-f",
        review_file.to_str().unwrap(),
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        answered["status"]["reason"],
        r#"RBAC: allowed by RoleBinding "bob-reads-pods/default" of Role "pod-reader" to User "bob""#
    );
    // A binding to a role that does not exist: refusals say so.
    root.ok(&["create", "rolebinding", "dangling", "--clusterrole=nope", "--user=bob"]);
    crate::util::wait_until(
        std::time::Duration::from_secs(30),
        "the dangling binding is known",
        || {
            bob.run(&["auth", "can-i", "delete", "pods"]).1
                == "no - RBAC: clusterrole.rbac.authorization.k8s.io \"nope\" not found\n"
        },
    );
    root.ok(&["delete", "rolebinding", "dangling"]);
    assert!(!bob.run(&["get", "pods", "-n", "kube-system"]).0, "only in the binding's namespace");
    let rules = bob.ok(&["auth", "can-i", "--list"]);
    assert!(
        rules.lines().any(|l| l.starts_with("pods ") && l.contains("[get list watch]")),
        "{rules}"
    );
    // Another spelling of a path is judged as the request it is: encoded slashes and letters
    // do not turn an exec or a secret into something bob may read.
    let ca = server.data.path().join("pki/apiserver.crt");
    for path in [
        "/api/v1/namespaces/default/pods/web%2Fexec?command=sh",
        "/api/v1/namespaces/kube-system%2Fsecrets",
        "/%61pi/v1/namespaces/default/secrets",
        "/apis/rbac.authorization.k8s.io/v1%2Fclusterrolebindings",
    ] {
        let answer = curl(port, &ca, Some("bob-token"), path);
        assert!(answer.ends_with(" 403") && answer.contains("is forbidden"), "{path}: {answer}");
    }

    root.ok(&["delete", "rolebinding", "bob-reads-pods"]);
    crate::util::wait_until(
        std::time::Duration::from_secs(30),
        "bob may no longer list pods",
        || !bob.run(&["get", "pods"]).0,
    );

    // `view` aggregates: a role labelled for it adds its rules, to every binding of `view`.
    root.ok(&["create", "rolebinding", "bob-views", "--clusterrole=view", "--user=bob"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob may view pods", || {
        bob.run(&["get", "pods"]).0
    });
    let can_get_leases = || bob.run(&["auth", "can-i", "get", "leases.coordination.k8s.io"]).1;
    assert_eq!(can_get_leases(), "no\n");
    let leases = r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "lease-viewer",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}"#;
    let leases_file = files.path().join("lease-viewer.json");
    std::fs::write(&leases_file, leases).unwrap();
    root.ok(&["create", "-f", leases_file.to_str().unwrap()]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "view grants leases", || {
        can_get_leases() == "yes\n"
    });
    // `admin` through `edit`, which aggregates `view`: an update after an update.
    crate::util::wait_until(std::time::Duration::from_secs(30), "admin grants leases", || {
        let admin = root.ok(&["get", "clusterrole", "admin", "-o", "json"]);
        admin.contains(r#""leases""#) && admin.contains("aggregationRule")
    });
    root.ok(&["delete", "clusterrole", "lease-viewer"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "and no longer", || {
        can_get_leases() == "no\n"
    });

    // A static token is for the API server alone: a review for another audience refuses it.
    let review = |audiences: Value| {
        let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "bob-token", "audiences": audiences}});
        server.post("/apis/authentication.k8s.io/v1/tokenreviews", &review).1["status"].clone()
    };
    let issuer = "https://kubernetes.default.svc.cluster.local";
    let ours = review(json!([]));
    assert_eq!((&ours["authenticated"], &ours["audiences"]), (&json!(true), &json!([issuer])));
    assert_eq!(review(json!([issuer, "other"]))["audiences"], json!([issuer]));
    assert!(review(json!(["other"]))["authenticated"].is_null());
}

/// Service account tokens: `kubectl create token` issues one (through the insecure port);
/// on the secure port it is the account, in the account's groups, with what RBAC grants the
/// account (the issuer's discovery document and keys among it); a TokenReview says the same;
/// too short a lifetime is 422; deleting the account revokes the token.
#[test]
fn service_account_tokens_authenticate_until_their_account_goes() {
    let (server, port) = secure_server();
    let insecure = server.kubectl();
    insecure.ok(&["create", "serviceaccount", "ci"]);
    let token = insecure.ok(&["create", "token", "ci"]).trim().to_string();
    // The request's answer: its own metadata without what the server sets (a uid), created
    // now; no bound object.
    let (code, issued) = server.post(
        "/api/v1/namespaces/default/serviceaccounts/ci/token",
        &serde_json::json!({"metadata": {"uid": "mine"}, "spec": {}}),
    );
    assert_eq!(code, 201, "{issued}");
    let created = issued["metadata"]["creationTimestamp"].as_str().unwrap_or("");
    assert!(created.ends_with('Z'), "{issued}");
    assert_eq!(
        issued["metadata"],
        serde_json::json!({"name": "ci", "namespace": "default", "creationTimestamp": created})
    );
    assert_eq!(issued["spec"]["boundObjectRef"], Value::Null, "{issued}");
    let ci = SecureKubectl::new(
        port,
        &server.data.path().join("pki/apiserver.crt"),
        &format!("{{token: {token}}}"),
    );
    let me = whoami(&ci);
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:ci");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        serde_json::json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    assert!(ci.refused(&["get", "pods"]).contains("system:serviceaccount:default:ci"));
    // The token's id, as Kubernetes 1.32 tracks it.
    let id = &me["status"]["userInfo"]["extra"]["authentication.kubernetes.io/credential-id"];
    assert!(id[0].as_str().is_some_and(|id| id.starts_with("JTI=")), "{me}");

    // Issuer discovery: service accounts may read where the token's key is, and the key.
    let document = ci.ok(&["get", "--raw", "/.well-known/openid-configuration"]);
    let document: Value = serde_json::from_str(&document).unwrap();
    assert_eq!(document["issuer"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(document["jwks_uri"], format!("https://127.0.0.1:{port}/openid/v1/jwks"));
    let keys: Value = serde_json::from_str(&ci.ok(&["get", "--raw", "/openid/v1/jwks"])).unwrap();
    let kid = jsonwebtoken::decode_header(&token).unwrap().kid.unwrap();
    assert_eq!(keys["keys"][0]["kid"], json!(kid), "{keys}");
    assert_eq!(keys["keys"][0]["crv"], "P-256");

    insecure.ok(&[
        "create",
        "rolebinding",
        "ci-admin",
        "--clusterrole=cluster-admin",
        "--serviceaccount=default:ci",
    ]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "ci may list pods", || {
        ci.run(&["get", "pods"]).0
    });

    let review = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}});
    let (code, answered) = server.post("/apis/authentication.k8s.io/v1/tokenreviews", &review);
    assert_eq!(code, 201, "{answered}");
    assert_eq!(answered["status"]["authenticated"], true);
    assert_eq!(answered["status"]["user"]["username"], "system:serviceaccount:default:ci");
    let forged = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": format!("{token}x")}});
    let (_, refused) = server.post("/apis/authentication.k8s.io/v1/tokenreviews", &forged);
    assert!(refused["status"].get("authenticated").is_none(), "{refused}");
    let empty = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {}});
    let (code, refused) = server.post("/apis/authentication.k8s.io/v1/tokenreviews", &empty);
    assert_eq!(
        (code, refused["message"].as_str()),
        (400, Some("token is required for TokenReview in authentication.k8s.io"))
    );

    let (ok, _, err) = insecure.run(&["create", "token", "ci", "--duration=1m"]);
    assert!(!ok && err.contains("may not specify a duration less than 10 minutes"), "{err}");

    insecure.ok(&["delete", "serviceaccount", "ci"]);
    let refused = ci.refused(&["auth", "whoami"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");
}

/// Long-lived tokens as Kubernetes' documentation makes them: a
/// `kubernetes.io/service-account-token` Secret naming an account is given the account's
/// token, its namespace and the root CA certificate; the token is the account on the secure
/// port (a TokenReview agrees) while the Secret holds it, and its use is noted on the Secret;
/// deleting the Secret revokes it. A Secret naming an account that does not exist is deleted.
#[test]
fn service_account_token_secrets_hold_long_lived_tokens() {
    use base64::Engine;
    let decode = |text: &str| {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim()).unwrap();
        String::from_utf8(bytes).unwrap()
    };
    let logs = tempfile::tempdir().unwrap();
    let audit = logs.path().join("audit.log");
    let audit_path = audit.display().to_string();
    let (server, port) = secure_server_with(&[("KPLANE_SERVER__AUDIT_LOG_PATH", &audit_path)]);
    let insecure = server.kubectl();
    insecure.ok(&["create", "serviceaccount", "deployer"]);
    let secret = |name: &str, account: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  annotations:\n    \
             kubernetes.io/service-account.name: {account}\ntype: kubernetes.io/service-account-token\n"
        )
    };
    let manifest = insecure.write("token.yaml", &secret("deployer-token", "deployer"));
    insecure.ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let data_of = |secret: &str, key: &str| {
        let path = format!("jsonpath={{.data.{}}}", key.replace('.', "\\."));
        insecure.run(&["get", "secret", secret, "-o", &path]).1
    };
    let data = |key: &str| data_of("deployer-token", key);
    crate::util::wait_until(std::time::Duration::from_secs(30), "the token filled in", || {
        !data("token").is_empty()
    });
    let token = decode(&data("token"));
    assert_eq!(decode(&data("namespace")), "default");
    let root_ca =
        insecure.ok(&["get", "configmap", "kube-root-ca.crt", "-o", "jsonpath={.data.ca\\.crt}"]);
    assert!(root_ca.contains("BEGIN CERTIFICATE"), "{root_ca}");
    assert_eq!(decode(&data("ca.crt")), root_ca);
    let uid = insecure.ok(&["get", "serviceaccount", "deployer", "-o", "jsonpath={.metadata.uid}"]);
    let said = insecure.ok(&["get", "secret", "deployer-token", "-o", "json"]);
    let said: Value = serde_json::from_str(&said).unwrap();
    assert_eq!(said["metadata"]["annotations"]["kubernetes.io/service-account.uid"], json!(uid));

    let deployer = SecureKubectl::new(
        port,
        &server.data.path().join("pki/apiserver.crt"),
        &format!("{{token: {token}}}"),
    );
    let me = whoami(&deployer);
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:deployer");
    let labels =
        insecure.ok(&["get", "secret", "deployer-token", "-o", "jsonpath={.metadata.labels}"]);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert!(
        labels.contains(&format!(r#""kubernetes.io/legacy-token-last-used":"{today}""#)),
        "{labels}"
    );
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token}});
    let (_, answered) = server.post("/apis/authentication.k8s.io/v1/tokenreviews", &review);
    assert_eq!(answered["status"]["user"]["username"], "system:serviceaccount:default:deployer");

    let orphan = insecure.write("orphan.yaml", &secret("orphan-token", "nobody"));
    insecure.ok(&["apply", "-f", orphan.to_str().unwrap()]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "the orphan deleted", || {
        !insecure.run(&["get", "secret", "orphan-token"]).0
    });

    // Listed in its account's `secrets`, as auto-generated tokens were: each use is warned
    // about, as kube-apiserver warns. The audit log names the Secret of each use, by its kind,
    // and a requested token's id.
    let events = || -> Vec<Value> {
        let log = std::fs::read_to_string(&audit).unwrap();
        log.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
    };
    let annotated = |events: &[Value], key: &str| -> Vec<String> {
        events.iter().filter_map(|e| e["annotations"][key].as_str()).map(String::from).collect()
    };
    let manual = "authentication.k8s.io/legacy-token-manual-secret";
    let autogenerated = "authentication.k8s.io/legacy-token-autogenerated-secret";
    let (_, _, quiet) = deployer.run(&["auth", "whoami"]);
    assert!(!quiet.contains("Warning"), "{quiet}");
    let before = events();
    assert!(annotated(&before, manual).contains(&"deployer-token".to_string()));
    assert!(annotated(&before, autogenerated).is_empty());
    let listed = r#"{"secrets":[{"name":"deployer-token"}]}"#;
    insecure.ok(&["patch", "serviceaccount", "deployer", "-p", listed]);
    let (ok, _, warned) = deployer.run(&["auth", "whoami"]);
    assert!(
        ok && warned.contains(
            "Warning: Use tokens from the TokenRequest API or manually created secret-based \
             tokens instead of auto-generated secret-based tokens."
        ),
        "{warned}"
    );
    let after = &events()[before.len()..];
    assert!(annotated(after, autogenerated).contains(&"deployer-token".to_string()));
    assert!(annotated(after, manual).is_empty());
    let issued = insecure.ok(&["create", "token", "deployer"]);
    let payload = issued.trim().split('.').nth(1).unwrap();
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap();
    let claims: Value = serde_json::from_slice(&payload).unwrap();
    let ids = annotated(&events(), "authentication.kubernetes.io/issued-credential-id");
    assert_eq!(ids, [format!("JTI={}", claims["jti"].as_str().unwrap())]);

    // Invalidated: refused, its use noted all the same (as kube-apiserver notes it).
    insecure.ok(&[
        "label",
        "secret",
        "deployer-token",
        "kubernetes.io/legacy-token-last-used-",
        "kubernetes.io/legacy-token-invalid-since=2026-12-01",
    ]);
    let refused = deployer.refused(&["auth", "whoami"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");
    let labels =
        insecure.ok(&["get", "secret", "deployer-token", "-o", "jsonpath={.metadata.labels}"]);
    assert!(labels.contains("kubernetes.io/legacy-token-last-used"), "{labels}");
    insecure.ok(&[
        "label",
        "secret",
        "deployer-token",
        "kubernetes.io/legacy-token-invalid-since-",
    ]);
    assert_eq!(
        whoami(&deployer)["status"]["userInfo"]["username"],
        me["status"]["userInfo"]["username"]
    );

    insecure.ok(&["delete", "secret", "deployer-token"]);
    let refused = deployer.refused(&["auth", "whoami"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");

    // An account being deleted (a finalizer holds it) takes its long-lived tokens with it at
    // once, as Kubernetes' legacy token validator refuses them (a requested token holds on a
    // minute longer, for a pod's containers stopping).
    insecure.ok(&["create", "serviceaccount", "leaving"]);
    let manifest = insecure.write("leaving.yaml", &secret("leaving-token", "leaving"));
    insecure.ok(&["apply", "-f", manifest.to_str().unwrap()]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "its token filled in", || {
        !data_of("leaving-token", "token").is_empty()
    });
    let leaving = SecureKubectl::new(
        port,
        &server.data.path().join("pki/apiserver.crt"),
        &format!("{{token: {}}}", decode(&data_of("leaving-token", "token"))),
    );
    let me = whoami(&leaving);
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:leaving");
    let hold = r#"{"metadata":{"finalizers":["example.com/hold"]}}"#;
    insecure.ok(&["patch", "serviceaccount", "leaving", "--type=merge", "-p", hold]);
    insecure.ok(&["delete", "serviceaccount", "leaving", "--wait=false"]);
    let refused = leaving.refused(&["auth", "whoami"]);
    assert!(refused.contains("You must be logged in to the server"), "{refused}");
}

/// RBAC's escalation check: a namespace's admin may write roles and bindings there, but only
/// with what they hold themselves.
#[test]
fn rbac_writers_cannot_grant_more_than_they_hold() {
    let files = tempfile::tempdir().unwrap();
    let (_server, _, root, bob) = rbac_server(files.path());
    root.ok(&["create", "rolebinding", "bob-admin", "--clusterrole=admin", "--user=bob"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob is admin", || {
        bob.run(&["auth", "can-i", "create", "roles"]).1 == "yes\n"
    });

    bob.ok(&["create", "role", "secret-reader", "--verb=get", "--resource=secrets"]);
    bob.ok(&["create", "rolebinding", "carol-views", "--clusterrole=view", "--user=carol"]);
    let refused = bob.refused(&["create", "role", "node-reader", "--verb=get", "--resource=nodes"]);
    assert!(
        refused
            .contains(r#"roles.rbac.authorization.k8s.io "node-reader" is forbidden: user "bob""#)
            && refused.contains("is attempting to grant RBAC permissions not currently held")
            && refused.contains(r#"Resources:["nodes"]"#),
        "{refused}"
    );
    let refused = bob.refused(&[
        "create",
        "rolebinding",
        "bob-root",
        "--clusterrole=cluster-admin",
        "--user=bob",
    ]);
    assert!(
        refused.contains("is attempting to grant RBAC permissions not currently held"),
        "{refused}"
    );
    // Nor by patching a role of their own.
    let patch = r#"[{"op": "add", "path": "/rules/-", "value": {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}}]"#;
    let refused = bob.refused(&["patch", "role", "secret-reader", "--type=json", "-p", patch]);
    assert!(refused.contains("not currently held"), "{refused}");
    // `escalate` limited to names covers updates of those roles, not creates (a create is
    // posted to the collection, naming no object).
    root.ok(&[
        "create",
        "role",
        "escalate-two",
        "--verb=escalate",
        "--resource=roles",
        "--resource-name=secret-reader",
        "--resource-name=node-writer",
    ]);
    root.ok(&["create", "rolebinding", "bob-escalates", "--role=escalate-two", "--user=bob"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob may escalate", || {
        bob.run(&["auth", "can-i", "escalate", "roles/secret-reader"]).1 == "yes\n"
    });
    bob.ok(&["patch", "role", "secret-reader", "--type=json", "-p", patch]);
    let refused =
        bob.refused(&["create", "role", "node-writer", "--verb=create", "--resource=nodes"]);
    assert!(refused.contains("not currently held"), "{refused}");
    // A binding to a role that does not exist: the role is not found (404), as in Kubernetes.
    let ghost = bob.refused(&["create", "rolebinding", "ghost", "--role=nosuch", "--user=carol"]);
    assert!(ghost.contains(r#"roles.rbac.authorization.k8s.io "nosuch" not found"#), "{ghost}");
    // A URL rule of a ClusterRole bound in the namespace is held to grant there.
    for role in ["foo-reader", "foo-reader-too"] {
        root.ok(&["create", "clusterrole", role, "--verb=get", "--non-resource-url=/foo"]);
    }
    root.ok(&["create", "rolebinding", "bob-foo", "--clusterrole=foo-reader", "--user=bob"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob holds /foo here", || {
        bob.run(&["create", "rolebinding", "dan-foo", "--clusterrole=foo-reader-too", "--user=dan"])
            .0
    });
    // The refusal names the writer's bindings whose roles are missing, each once.
    for name in ["bob-nope", "bob-nope-again"] {
        root.ok(&["create", "rolebinding", name, "--clusterrole=nope", "--user=bob"]);
    }
    let suffix = r#"; resolution errors: [clusterrole.rbac.authorization.k8s.io "nope" not found]"#;
    crate::util::wait_until(std::time::Duration::from_secs(30), "the missing role named", || {
        bob.refused(&["create", "role", "node-lister", "--verb=list", "--resource=nodes"])
            .trim_end()
            .ends_with(suffix)
    });
    // The cluster's admins may grant anything.
    root.ok(&["create", "rolebinding", "bob-root", "--clusterrole=cluster-admin", "--user=bob"]);
}

/// A server-side apply, or an update, that would create its object is authorized as a create,
/// as Kubernetes' patch and update handlers authorize it: `patch` or `update` alone changes
/// what exists, and creates nothing.
#[test]
fn an_apply_or_an_update_that_creates_needs_create() {
    let files = tempfile::tempdir().unwrap();
    let (_server, _, root, bob) = rbac_server(files.path());
    root.ok(&["create", "configmap", "kept", "--from-literal=a=1"]);
    root.ok(&["create", "role", "cm-patch", "--verb=get,patch", "--resource=configmaps"]);
    root.ok(&["create", "rolebinding", "bob-patches", "--role=cm-patch", "--user=bob"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob may patch", || {
        bob.run(&["auth", "can-i", "patch", "configmaps"]).1 == "yes\n"
    });
    let write = |file: String, body: String| {
        let path = files.path().join(file);
        std::fs::write(&path, body).unwrap();
        path.to_str().unwrap().to_string()
    };
    let manifest = |name: &str| {
        let body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: NAME}\ndata: {a: '2'}\n";
        write(format!("{name}.yaml"), body.replace("NAME", name))
    };
    bob.ok(&["apply", "--server-side", "--force-conflicts", "-f", &manifest("kept")]);
    let refused = bob.refused(&["apply", "--server-side", "-f", &manifest("fresh")]);
    assert!(
        refused.contains(r#"configmaps "fresh" is forbidden: User "bob" cannot create resource "configmaps" in API group "" in the namespace "default""#),
        "{refused}"
    );
    assert!(!root.run(&["get", "configmap", "fresh"]).0, "not created");
    assert_eq!(root.ok(&["get", "configmap", "kept", "-o", "jsonpath={.data.a}"]), "2");
    // A service's update creates it when there is none: for who may create services only.
    root.ok(&["create", "role", "svc-update", "--verb=get,update", "--resource=services"]);
    root.ok(&["create", "rolebinding", "bob-updates", "--role=svc-update", "--user=bob"]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob may update", || {
        bob.run(&["auth", "can-i", "update", "services"]).1 == "yes\n"
    });
    let service = |name: &str| {
        let body = "apiVersion: v1\nkind: Service\nmetadata: {name: NAME}\n\
                    spec: {ports: [{port: 80}]}\n";
        write(format!("svc-{name}.yaml"), body.replace("NAME", name))
    };
    root.ok(&["create", "-f", &service("there")]);
    bob.ok(&["replace", "-f", &service("there")]);
    let refused = bob.refused(&["replace", "-f", &service("absent")]);
    assert!(
        refused.contains(r#"services "absent" is forbidden: User "bob" cannot create resource "services" in API group "" in the namespace "default""#),
        "{refused}"
    );
    assert!(!root.run(&["get", "service", "absent"]).0, "not created");
}

/// Impersonation (`kubectl --as`, `--as-group`): allowed to who may `impersonate` the user,
/// each group, the service account; the request is then that user's, authorized as theirs;
/// otherwise 403 in Kubernetes' words.
#[test]
fn impersonation_takes_the_impersonate_verb() {
    let files = tempfile::tempdir().unwrap();
    let (_server, _, root, bob) = rbac_server(files.path());
    // The cluster's admin acts as bob, with bob's rights.
    let whoami = |kubectl: &SecureKubectl, args: &[&str]| -> Value {
        let mut all = vec!["auth", "whoami", "-o", "json"];
        all.extend_from_slice(args);
        serde_json::from_str(&kubectl.ok(&all)).unwrap()
    };
    let info = whoami(&root, &["--as", "bob", "--as-group", "dev"]);
    assert_eq!(info["status"]["userInfo"]["username"], "bob");
    assert_eq!(info["status"]["userInfo"]["groups"], json!(["dev", "system:authenticated"]));
    let denied = root.refused(&["get", "secrets", "--as", "bob"]);
    assert!(denied.contains(r#"User "bob" cannot list resource "secrets""#), "{denied}");
    assert_eq!(root.run(&["auth", "can-i", "list", "secrets", "--as", "bob"]).1, "no\n");
    // bob may not act as anyone until allowed to, by name. (With discovery cached first:
    // kubectl reads discovery as the user it impersonates, and tells a refusal there only
    // as `Forbidden: unknown`, with kube-apiserver too.)
    bob.run(&["api-resources"]);
    let refused = bob.refused(&["get", "pods", "--as", "root"]);
    assert!(
        refused.contains(r#"users "root" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{refused}"
    );
    root.ok(&[
        "create",
        "clusterrole",
        "be-carol",
        "--verb=impersonate",
        "--resource=users",
        "--resource-name=carol",
    ]);
    root.ok(&[
        "create",
        "clusterrolebinding",
        "bob-as-carol",
        "--clusterrole=be-carol",
        "--user=bob",
    ]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob may be carol", || {
        bob.run(&["auth", "whoami", "--as", "carol"]).0
    });
    assert_eq!(whoami(&bob, &["--as", "carol"])["status"]["userInfo"]["username"], "carol");
    let group = bob.refused(&["get", "pods", "--as", "carol", "--as-group", "system:masters"]);
    assert!(group.contains(r#"cannot impersonate resource "groups""#), "{group}");
    let account = bob.refused(&["get", "pods", "--as", "system:serviceaccount:default:default"]);
    assert!(account.contains(r#"serviceaccounts "default" is forbidden: User "bob" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "default""#), "{account}");
}

/// A ClusterRole's aggregation rule gathers the rules of whatever roles it selects, so only
/// who holds every permission may set or change one: a writer of ClusterRoles with a rule
/// they hold cannot aggregate cluster-admin's into it.
#[test]
fn only_cluster_admins_set_aggregation_rules() {
    let files = tempfile::tempdir().unwrap();
    let (_server, _, root, bob) = rbac_server(files.path());
    let writer = "--verb=create,get,list,update,patch";
    let resources = "--resource=clusterroles.rbac.authorization.k8s.io";
    root.ok(&["create", "clusterrole", "role-writer", writer, resources]);
    root.ok(&[
        "create",
        "clusterrolebinding",
        "bob-writes",
        "--clusterrole=role-writer",
        "--user=bob",
    ]);
    crate::util::wait_until(std::time::Duration::from_secs(30), "bob writes roles", || {
        bob.run(&["auth", "can-i", "create", "clusterroles"]).1 == "yes\n"
    });
    bob.ok(&["create", "clusterrole", "bobs", "--verb=get", resources]);
    let aggregate = r#"{"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"kubernetes.io/bootstrapping":"rbac-defaults"}}]}}"#;
    let forbidden = r#"clusterroles.rbac.authorization.k8s.io "bobs" is forbidden: must have cluster-admin privileges to use the aggregationRule"#;
    let refused = bob.refused(&["patch", "clusterrole", "bobs", "--type=merge", "-p", aggregate]);
    assert!(refused.contains(forbidden), "{refused}");
    let created = bob.refused(&[
        "create",
        "clusterrole",
        "bobs2",
        "--aggregation-rule=kubernetes.io/bootstrapping=rbac-defaults",
    ]);
    assert!(
        created.contains("must have cluster-admin privileges to use the aggregationRule"),
        "{created}"
    );
    assert_eq!(bob.run(&["auth", "can-i", "get", "secrets", "-A"]).1, "no\n");
    // A role that aggregates stays out of reach once a cluster admin made it so.
    let nothing =
        r#"{"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"selects":"none"}}]}}"#;
    root.ok(&["patch", "clusterrole", "bobs", "--type=merge", "-p", nothing]);
    let refused = bob.refused(&[
        "patch",
        "clusterrole",
        "bobs",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/aggregationRule"}]"#,
    ]);
    assert!(refused.contains(forbidden), "{refused}");
    // What only the garbage collector and finalizers work with is not checked: a finalizer
    // an admin put there may be taken off by who writes roles.
    let finalizer = r#"{"metadata":{"finalizers":["example.com/keep"]}}"#;
    root.ok(&["patch", "clusterrole", "bobs", "--type=merge", "-p", finalizer]);
    let remove = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    bob.ok(&["patch", "clusterrole", "bobs", "--type=json", "-p", remove]);
}

/// The audit log rotates at its size (`--audit-log-maxsize`, in megabytes): the full log is
/// renamed with the time and a new one begun; past `--audit-log-maxbackup`, the oldest
/// rotated logs go.
#[test]
fn the_audit_log_rotates_at_its_size() {
    let files = tempfile::tempdir().unwrap();
    let audit = files.path().join("audit.log");
    let server = Server::start_with_env(&[
        ("KPLANE_SERVER__AUDIT_LOG_PATH", audit.to_str().unwrap()),
        ("KPLANE_SERVER__AUDIT_LOG_MAXSIZE", "1"),
        ("KPLANE_SERVER__AUDIT_LOG_MAXBACKUP", "1"),
    ]);
    let names = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(files.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        names
    };
    // Requests until the log has been rotated twice: the first rotated log is gone then.
    let mut first_rotated = None;
    let mut requests = 0;
    loop {
        assert_eq!(server.get("/api/v1/namespaces/default").0, 200);
        requests += 1;
        assert!(requests < 20_000, "not rotated twice in {requests} requests: {:?}", names());
        let rotated = names().into_iter().find(|n| n != "audit.log");
        match (&first_rotated, rotated) {
            (None, Some(name)) => first_rotated = Some(name),
            (Some(first), Some(name)) if *first != name => break,
            _ => {}
        }
    }
    let names = names();
    assert_eq!(names.len(), 2, "the log and the newest rotated one: {names:?}");
    assert!(names[0].starts_with("audit-") && names[0].ends_with(".log"), "{names:?}");
    let rotated = std::fs::read_to_string(files.path().join(&names[0])).unwrap();
    assert!(rotated.len() <= 1 << 20 && rotated.len() > 900_000, "{}", rotated.len());
    for line in rotated.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        assert_eq!(event["kind"], "Event");
    }
}

/// A data directory of an older kplane, whose `view` was written out without its
/// `aggregationRule`, gets the rule at the next start, as Kubernetes reconciles its bootstrap
/// roles; one whose `autoupdate` annotation was turned off is left as it is.
#[test]
fn older_bootstrap_roles_are_given_their_aggregation_rule() {
    let mut server = Server::start();
    let path = |name: &str| format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}");
    for (name, autoupdate) in [("view", "true"), ("edit", "false")] {
        let mut role = server.get(&path(name)).1;
        role.as_object_mut().unwrap().remove("aggregationRule");
        role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] =
            Value::from(autoupdate);
        assert_eq!(server.put(&path(name), &role).0, 200);
    }
    server.restart();
    assert!(server.get(&path("view")).1["aggregationRule"].is_object());
    assert!(server.get(&path("edit")).1.get("aggregationRule").is_none());
}

/// The bootstrap roles and bindings still annotated `autoupdate: "true"` get back, at each
/// start, the rules and subjects a user took from them (what a user added stays); a restart
/// with nothing taken changes nothing.
#[test]
fn bootstrap_roles_and_bindings_are_reconciled_at_start() {
    let mut server = Server::start();
    let role = "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:discovery";
    let binding = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin";
    let (_, original_role) = server.get(role);
    let (_, original_binding) = server.get(binding);
    let mut cut = original_role.clone();
    cut["rules"] = json!([{"verbs": ["get"], "nonResourceURLs": ["/api", "/extra"]}]);
    assert_eq!(server.put(role, &cut).0, 200);
    let mut robbed = original_binding.clone();
    robbed["subjects"] =
        json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}]);
    assert_eq!(server.put(binding, &robbed).0, 200);
    server.restart();
    let (_, role_now) = server.get(role);
    for rule in original_role["rules"].as_array().unwrap() {
        assert!(role_now["rules"].as_array().unwrap().contains(rule), "{role_now}");
    }
    assert!(
        role_now["rules"].as_array().unwrap().contains(&cut["rules"][0]),
        "what was added stays"
    );
    let (_, binding_now) = server.get(binding);
    let subjects = binding_now["subjects"].as_array().unwrap();
    assert!(
        subjects.contains(&original_binding["subjects"][0])
            && subjects.contains(&robbed["subjects"][0])
    );
    // Nothing taken: nothing written.
    let revision = |object: &Value| object["metadata"]["resourceVersion"].clone();
    server.restart();
    assert_eq!(revision(&server.get(role).1), revision(&role_now));
    assert_eq!(revision(&server.get(binding).1), revision(&binding_now));
}
