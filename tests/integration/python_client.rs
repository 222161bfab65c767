//! The official Kubernetes Python client, unchanged, against a real server
//! (tests/python/client_test.py; `scripts/setup.sh` installs the client into `.venv`).

use std::path::PathBuf;
use std::process::Command;

use crate::util::Server;

#[test]
fn the_python_client_works_unchanged() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = crate::util::python();
    // With a node agent, for exec, metrics and eviction (pods it runs name its node; there is
    // no scheduler), and
    // the secure port with a token of system:masters.
    let files = tempfile::tempdir().unwrap();
    let tokens = files.path().join("tokens.csv");
    std::fs::write(&tokens, "python-token,root,1,system:masters\n").unwrap();
    let secure_port = crate::util::free_port().to_string();
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "python-node"),
        ("KPLANE_AGENT__SERVICE_PROXY", "false"),
        ("KPLANE_METRICS_SERVER__RESOLUTION_SECONDS", "1"),
        ("KPLANE_SERVER__SECURE_PORT", &secure_port),
        ("KPLANE_SERVER__BIND_ADDRESS", "127.0.0.1"),
        ("KPLANE_SERVER__TOKEN_AUTH_FILE", tokens.to_str().unwrap()),
    ]);
    let output = Command::new(&python)
        .arg(root.join("tests/python/client_test.py"))
        .arg(server.base())
        .arg("python-node")
        .arg(format!("https://127.0.0.1:{secure_port}"))
        .arg(server.data.path().join("pki/apiserver.crt"))
        .arg("python-token")
        .output()
        .expect("run the Python client test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "python client test failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
