//! A request whose handler panics is answered as kube-apiserver's `WithPanicRecovery` answers
//! it: a plain-text 500 saying so, the panic logged with the request; the worker goes on
//! serving. The answer is an error, not a response: this filter cannot hold the request (the
//! router needs it alone), so the filters around it see an error (metrics count a 500; no
//! audit event is written) and the HTTP layer sends the error's answer.

use std::panic::AssertUnwindSafe;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::HttpResponse;
use futures::FutureExt;

/// kube-apiserver's words for it.
const PANICKED: &str = "This request caused apiserver to panic. Look in the logs for details.\n";

pub async fn answer_500(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    // Whatever the handler held when it panicked belonged to this request alone.
    match AssertUnwindSafe(next.call(req)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!(%method, %uri, "apiserver panic'd");
            let response = HttpResponse::InternalServerError()
                .insert_header((header::CONTENT_TYPE, "text/plain; charset=utf-8"))
                .insert_header((
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ))
                .body(PANICKED);
            Err(InternalError::from_response("the request panicked", response).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::middleware::from_fn;
    use actix_web::{test, web, App, HttpResponse};

    async fn buggy() -> HttpResponse {
        panic!("a handler's bug")
    }

    #[actix_web::test]
    async fn a_panicking_handler_is_answered_500_and_the_next_request_served() {
        let app = test::init_service(
            App::new()
                .wrap(from_fn(super::answer_500))
                .route("/bug", web::get().to(buggy))
                .route("/fine", web::get().to(|| async { HttpResponse::Ok().body("fine") })),
        )
        .await;
        let error = test::try_call_service(&app, test::TestRequest::get().uri("/bug").to_request())
            .await
            .err()
            .expect("an error for the HTTP layer to answer");
        let response = error.error_response();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers().get("content-type").unwrap(), "text/plain; charset=utf-8");
        assert_eq!(response.headers().get("x-content-type-options").unwrap(), "nosniff");
        let body = actix_web::body::to_bytes(response.into_body()).await.unwrap();
        assert_eq!(body, super::PANICKED);
        let response =
            test::call_service(&app, test::TestRequest::get().uri("/fine").to_request()).await;
        assert_eq!(response.status(), 200);
        assert_eq!(test::read_body(response).await, "fine");
    }
}
