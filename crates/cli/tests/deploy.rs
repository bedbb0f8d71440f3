//! The deployment files (deploy/) pass the offline validators of
//! deploy/validate.py (`kubernetes-validate --strict` for the core
//! objects, `check-jsonschema` with deploy/schemas for InferencePool and
//! HTTPRoute, minfer's own rules for probes, grace period and the
//! Dockerfile), and a deliberately broken copy of each does not.
//!
//! The Python is MINFER_TEST_PYTHON (scripts/test.sh installs both
//! validators in target/pyenv). Without it the test fails, unless
//! MINFER_REQUIRE_MODELS=0 turns that into a recorded skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn python() -> Option<PathBuf> {
    match std::env::var_os("MINFER_TEST_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            minfer_testutil::skip(
                "MINFER_TEST_PYTHON (a Python with kubernetes-validate and check-jsonschema)",
                "scripts/test.sh creates it in target/pyenv with the pinned versions",
            );
            None
        }
    }
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn validate(python: &Path, k8s: &Path, dockerfile: &Path) -> Output {
    Command::new(python)
        .arg(deploy_dir().join("validate.py"))
        .arg(k8s)
        .arg("--dockerfile")
        .arg(dockerfile)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run deploy/validate.py")
}

/// A copy of deploy/k8s and the Dockerfile in a temporary directory.
fn copy(into: &Path) -> (PathBuf, PathBuf) {
    let k8s = into.join("k8s");
    std::fs::create_dir_all(&k8s).unwrap();
    for entry in std::fs::read_dir(deploy_dir().join("k8s")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), k8s.join(entry.file_name())).unwrap();
    }
    let dockerfile = into.join("Dockerfile");
    std::fs::copy(deploy_dir().join("Dockerfile"), &dockerfile).unwrap();
    (k8s, dockerfile)
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn deployment_files_pass_the_offline_validators() {
    let Some(python) = python() else {
        return;
    };
    let out = validate(
        &python,
        &deploy_dir().join("k8s"),
        &deploy_dir().join("Dockerfile"),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for (file, validator) in [
        ("deployment.yaml (Deployment)", "kubernetes-validate"),
        ("service.yaml (Service)", "kubernetes-validate"),
        ("inferencepool.yaml (InferencePool)", "check-jsonschema"),
        ("httproute.yaml (HTTPRoute)", "check-jsonschema"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(file) && l.contains(validator)),
            "{file} not checked by {validator}: {text}"
        );
    }
    assert!(text.contains("ok  Dockerfile"), "{text}");
}

#[test]
fn broken_deployment_files_fail_validation() {
    let Some(python) = python() else {
        return;
    };
    // (file, what is replaced, by what, what the failure names)
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "deployment.yaml",
            "replicas: 3",
            "replicas: three",
            "deployment.yaml (Deployment), kubernetes-validate",
        ),
        (
            "deployment.yaml",
            "          readinessProbe:",
            "          readinesProbe:",
            "deployment.yaml (Deployment), kubernetes-validate",
        ),
        (
            "service.yaml",
            "      targetPort: http",
            "      targetPort: http\n      targetPorts: http",
            "service.yaml (Service), kubernetes-validate",
        ),
        (
            "inferencepool.yaml",
            "  targetPorts:\n    - number: 8080\n",
            "",
            "inferencepool.yaml (InferencePool), check-jsonschema",
        ),
        (
            "inferencepool.yaml",
            "failureMode: FailClose",
            "failureMode: Closed",
            "inferencepool.yaml (InferencePool), check-jsonschema",
        ),
        (
            "httproute.yaml",
            "type: PathPrefix",
            "type: Prefix",
            "httproute.yaml (HTTPRoute), check-jsonschema",
        ),
        (
            "deployment.yaml",
            "terminationGracePeriodSeconds: 30",
            "terminationGracePeriodSeconds: 10",
            "terminationGracePeriodSeconds 10 < preStop 5 s + --drain-timeout 20 s",
        ),
        (
            "deployment.yaml",
            "path: /metrics",
            "path: /health",
            "livenessProbe on /health",
        ),
        (
            "Dockerfile",
            "USER minfer\n",
            "",
            "Dockerfile: the runtime stage does not switch to a non-root USER",
        ),
    ];
    for &(file, from, to, named) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (k8s, dockerfile) = copy(dir.path());
        let target = if file == "Dockerfile" {
            dockerfile.clone()
        } else {
            k8s.join(file)
        };
        edit(&target, from, to);
        let out = validate(&python, &k8s, &dockerfile);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{file} with {to:?} passed: {}{err}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(err.contains(named), "{file} with {to:?}: {err}");
    }
}
