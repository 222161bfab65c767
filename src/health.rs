//! Health answers (`/healthz`, `/livez`, `/readyz` of the API server, `/healthz` of the node
//! agent) written as Kubernetes' `healthz` package writes them: `ok`, or with `verbose` a line
//! a check and the verdict; `exclude=<check>` passes a check over (and says so of a check
//! there is not); a failure is a 500 that withholds why; plain text the browser must not
//! sniff.

use std::collections::BTreeSet;

use actix_web::{HttpResponse, HttpResponseBuilder};

/// What a health request asks: `verbose`, and the checks to pass over.
pub struct HealthQuery {
    verbose: bool,
    excluded: BTreeSet<String>,
}

impl HealthQuery {
    /// The query string `query` (a malformed one asks nothing).
    pub fn of(query: &str) -> Self {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
        Self {
            verbose: pairs.iter().any(|(key, _)| key == "verbose"),
            excluded: pairs.into_iter().filter(|(k, _)| k == "exclude").map(|(_, v)| v).collect(),
        }
    }

    /// Whether the check `name` is passed over.
    pub fn excludes(&self, name: &str) -> bool {
        self.excluded.contains(name)
    }
}

/// The answer of `endpoint` (`healthz`, `livez`, `readyz`) to `query`, from the outcome of
/// each check in order (`None`: excluded; `Err`: failed, why to be logged).
pub fn answer(
    endpoint: &str,
    query: &HealthQuery,
    outcomes: Vec<(&str, Option<Result<(), String>>)>,
) -> HttpResponse {
    let mut lines = Vec::new();
    let mut failed = false;
    let mut unmatched = query.excluded.clone();
    for (name, outcome) in outcomes {
        unmatched.remove(name);
        match outcome {
            None => lines.push(format!("[+]{name} excluded: ok")),
            Some(Ok(())) => lines.push(format!("[+]{name} ok")),
            Some(Err(why)) => {
                tracing::warn!(check = name, %why, "{endpoint} check failed");
                failed = true;
                lines.push(format!("[-]{name} failed: reason withheld"));
            }
        }
    }
    if !unmatched.is_empty() {
        let quoted: Vec<String> = unmatched.iter().map(|name| format!("{name:?}")).collect();
        let quoted = quoted.join(",");
        lines.push(format!("warn: some health checks cannot be excluded: no matches for {quoted}"));
    }
    let outcome = if failed { "failed" } else { "passed" };
    lines.push(format!("{endpoint} check {outcome}"));
    let body = if query.verbose || failed { lines.join("\n") + "\n" } else { "ok".to_string() };
    let mut response =
        if failed { HttpResponse::InternalServerError() } else { HttpResponse::Ok() };
    plain_text(&mut response).body(body)
}

/// The answer of one check asked for by name (which takes a permission of its own, so a
/// failure says why, as Kubernetes' `adaptCheckToHandler`); `None`: there is no such check.
pub fn answer_one(outcome: Option<Result<(), String>>) -> HttpResponse {
    match outcome {
        None => plain_text(&mut HttpResponse::NotFound()).body("404 page not found\n"),
        Some(Ok(())) => plain_text(&mut HttpResponse::Ok()).body("ok"),
        Some(Err(why)) => plain_text(&mut HttpResponse::InternalServerError())
            .body(format!("internal server error: {why}\n")),
    }
}

/// A health answer's headers: plain text the browser must not sniff.
fn plain_text(response: &mut HttpResponseBuilder) -> &mut HttpResponseBuilder {
    response
        .content_type("text/plain; charset=utf-8")
        .insert_header(("X-Content-Type-Options", "nosniff"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn text(response: HttpResponse) -> (u16, String) {
        let status = response.status().as_u16();
        let body = actix_web::body::to_bytes(response.into_body()).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[actix_web::test]
    async fn answers_are_written_as_kubernetes_writes_them() {
        let all = |query: &HealthQuery, failing: bool| {
            ["ping", "log", "etcd"]
                .into_iter()
                .map(|name| {
                    let outcome =
                        if failing && name == "etcd" { Err("disk".into()) } else { Ok(()) };
                    (name, (!query.excludes(name)).then_some(outcome))
                })
                .collect::<Vec<_>>()
        };
        let plain = HealthQuery::of("");
        assert_eq!(text(answer("livez", &plain, all(&plain, false))).await, (200, "ok".into()));
        let verbose = HealthQuery::of("verbose&exclude=log&exclude=x&exclude=a");
        assert_eq!(
            text(answer("readyz", &verbose, all(&verbose, false))).await.1,
            "[+]ping ok\n[+]log excluded: ok\n[+]etcd ok\nwarn: some health checks cannot be \
             excluded: no matches for \"a\",\"x\"\nreadyz check passed\n"
        );
        let (code, body) = text(answer("healthz", &plain, all(&plain, true))).await;
        assert_eq!(code, 500);
        assert!(
            body.ends_with("[-]etcd failed: reason withheld\nhealthz check failed\n"),
            "{body}"
        );
        assert_eq!(text(answer_one(None)).await, (404, "404 page not found\n".into()));
        let failed = answer_one(Some(Err("disk".into())));
        assert_eq!(failed.headers().get("x-content-type-options").unwrap(), "nosniff");
        assert_eq!(text(failed).await, (500, "internal server error: disk\n".into()));
    }
}
