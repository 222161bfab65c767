//! Response compression, as kube-apiserver's `APIResponseCompression` does it: a response body
//! of at least 128 KiB, to a client whose `Accept-Encoding` lists `gzip` (client-go's, and so
//! kubectl's, does), is gzipped at level 1. Streams (watches, logs, proxied bodies) are
//! written as they come.

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;

/// kube-apiserver's `defaultGzipThresholdBytes`.
const THRESHOLD: u64 = 128 * 1024;

pub async fn gzip(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<BoxBody>>, actix_web::Error> {
    let accepted = req.headers().get(header::ACCEPT_ENCODING).is_some_and(takes_gzip);
    let response = next.call(req).await?;
    let large = matches!(response.response().body().size(), BodySize::Sized(n) if n >= THRESHOLD);
    let encoded = response.headers().contains_key(header::CONTENT_ENCODING);
    if !accepted || !large || encoded {
        return Ok(response.map_body(|_, body| EitherBody::left(body.boxed())));
    }
    let (req, response) = response.into_parts();
    let (mut head, body) = response.into_parts();
    let bytes = match body.try_into_bytes() {
        Ok(bytes) => bytes,
        // A stream that told its size: written as it comes.
        Err(body) => {
            let response = head.set_body(EitherBody::left(body.boxed()));
            return Ok(ServiceResponse::new(req, response));
        }
    };
    let compressed = compress(&bytes);
    let headers = head.headers_mut();
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    let response = head.set_body(EitherBody::right(BoxBody::new(compressed)));
    Ok(ServiceResponse::new(req, response))
}

/// Whether an `Accept-Encoding` lists `gzip` bare, as kube-apiserver's
/// `negotiateContentEncoding` reads it (`gzip;q=0`, or with any parameter, is not taken).
fn takes_gzip(value: &HeaderValue) -> bool {
    let Ok(value) = value.to_str() else { return false };
    value.split(',').any(|coding| coding.trim() == "gzip")
}

fn compress(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::new(1),
    );
    encoder.write_all(bytes).expect("writing to a Vec cannot fail");
    encoder.finish().expect("writing to a Vec cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_as_go_reads_the_header() {
        let takes = |v: &str| takes_gzip(&HeaderValue::from_str(v).unwrap());
        assert!(takes("gzip"));
        assert!(takes("deflate, gzip"));
        assert!(takes("identity, gzip "));
        assert!(!takes("gzip;q=0"), "a parameter, even q=1, is not taken, as in Kubernetes");
        assert!(!takes("deflate"));
        assert!(!takes("x-gzip"));
        assert!(!takes(""));
    }

    #[test]
    fn compressed_bodies_read_back_whole() {
        use std::io::Read;
        let body = b"{\"kind\":\"List\"}".repeat(10_000);
        let mut read = Vec::new();
        flate2::read::GzDecoder::new(&compress(&body)[..]).read_to_end(&mut read).unwrap();
        assert_eq!(read, body);
    }
}
