//! What kube-apiserver's proxy transport rewrites in a proxied answer, so that a web page
//! served through `.../proxy/` keeps working there: a redirect's `Location` and the links of an
//! HTML page that point at the backend's own host (absolute paths, or URLs naming the backend
//! or the host the client asked) get the proxy's path prefix. Relative links and other hosts'
//! URLs are left alone; they resolve under `proxy/` already, or leave it on purpose.

use std::io::{Read, Write};

use lol_html::html_content::Element;
use lol_html::{element, HtmlRewriter, Settings};

/// The attributes that hold URLs, tag by tag (the HTML 4 and 5 attribute indexes, as
/// Kubernetes' proxy transport lists them).
/// The largest page rewritten, in bytes (decoded): kube-apiserver holds a page whole however
/// large; here a larger one goes on as it comes, so that a page without end, or a small gzip
/// of a huge one, cannot take the server's memory.
pub const LARGEST_PAGE: usize = 16 << 20;

const URL_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("a", &["href"]),
    ("applet", &["codebase"]),
    ("area", &["href"]),
    ("audio", &["src"]),
    ("base", &["href"]),
    ("blockquote", &["cite"]),
    ("body", &["background"]),
    ("button", &["formaction"]),
    ("command", &["icon"]),
    ("del", &["cite"]),
    ("embed", &["src"]),
    ("form", &["action"]),
    ("frame", &["longdesc", "src"]),
    ("head", &["profile"]),
    ("html", &["manifest"]),
    ("iframe", &["longdesc", "src"]),
    ("img", &["longdesc", "src", "usemap"]),
    ("input", &["src", "usemap", "formaction"]),
    ("ins", &["cite"]),
    ("link", &["href"]),
    ("object", &["classid", "codebase", "data", "usemap"]),
    ("q", &["cite"]),
    ("script", &["src"]),
    ("source", &["src"]),
    ("video", &["poster", "src"]),
];

/// How the URLs of one proxied answer are rewritten.
pub struct UrlRewriter<'a> {
    /// The request's path up to the proxied path: `/api/v1/namespaces/ns/pods/web/proxy`.
    pub prefix: &'a str,
    /// The backend's `host:port`, as the request to it named it.
    pub backend_host: &'a str,
    /// The host the client asked for (its `Host` header), passed on to the backend.
    pub request_host: &'a str,
}

impl UrlRewriter<'_> {
    /// `target` (a `Location`, a link) pointed into the proxy, when it points at the backend:
    /// its path prefixed (unless it has the prefix already), the backend's scheme and host
    /// dropped. Kept as it is: relative references, other hosts, opaque URLs (`mailto:`).
    pub fn url(&self, target: &str) -> String {
        let parts = UrlParts::split(target);
        let other_host = parts.host.is_some_and(|host| {
            !host.is_empty() && host != self.backend_host && host != self.request_host
        });
        if other_host || !parts.path.starts_with('/') {
            return target.to_string();
        }
        // The host the client asked for stays (a link to it is reached as it was).
        let keeps_host = parts.host == Some(self.request_host);
        let mut out = String::with_capacity(target.len() + self.prefix.len());
        if keeps_host {
            out.push_str(&target[..target.len() - parts.from_path.len()]);
        }
        if parts.path.starts_with(self.prefix) {
            out.push_str(parts.from_path);
            return out;
        }
        out.push_str(&clean_path(&format!("{}/{}", self.prefix, parts.path)));
        if parts.path.ends_with('/') && !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(&parts.from_path[parts.path.len()..]);
        out
    }

    /// An HTML page with its URL attributes rewritten by [`UrlRewriter::url`]; everything else
    /// is left byte for byte. `None` when the page cannot be read as HTML.
    pub fn html(&self, page: &[u8]) -> Option<Vec<u8>> {
        let selector = URL_ATTRIBUTES.iter().map(|(tag, _)| *tag).collect::<Vec<_>>().join(",");
        let rewrite = |element: &mut Element| {
            let tag = element.tag_name();
            let attributes = URL_ATTRIBUTES.iter().find(|(t, _)| *t == tag).map(|(_, a)| *a);
            for attribute in attributes.unwrap_or_default() {
                if let Some(value) = element.get_attribute(attribute) {
                    let rewritten = self.url(&value);
                    if rewritten != value {
                        element.set_attribute(attribute, &rewritten)?;
                    }
                }
            }
            Ok(())
        };
        let mut output = Vec::with_capacity(page.len() + page.len() / 8);
        let settings = Settings::new().append_element_content_handler(element!(selector, rewrite));
        let mut rewriter =
            HtmlRewriter::new(settings, |chunk: &[u8]| output.extend_from_slice(chunk));
        rewriter.write(page).ok()?;
        rewriter.end().ok()?;
        Some(output)
    }

    /// A proxied HTML page as [`UrlRewriter::html`] rewrites it, in its `Content-Encoding`
    /// (none, `gzip` or `deflate`; a zlib stream or a raw one, as servers differ): decoded,
    /// rewritten and encoded again. `None` for another encoding or a page that does not
    /// decode: it is then passed on as it came.
    pub fn encoded_html(&self, page: &[u8], encoding: &str) -> Option<Vec<u8>> {
        use flate2::{read, write, Compression};
        // A page that decodes past the largest rewritten (a small gzip of a huge page) is
        // passed on as it came.
        let decoded = |reader: Box<dyn Read + '_>| {
            let mut plain = Vec::new();
            reader.take(LARGEST_PAGE as u64 + 1).read_to_end(&mut plain).ok()?;
            (plain.len() <= LARGEST_PAGE).then_some(plain)
        };
        match encoding {
            "" => self.html(page),
            "gzip" => {
                let page = self.html(&decoded(Box::new(read::GzDecoder::new(page)))?)?;
                let mut writer = write::GzEncoder::new(Vec::new(), Compression::default());
                writer.write_all(&page).ok()?;
                writer.finish().ok()
            }
            "deflate" => match decoded(Box::new(read::ZlibDecoder::new(page))) {
                Some(plain) => {
                    let page = self.html(&plain)?;
                    let mut writer = write::ZlibEncoder::new(Vec::new(), Compression::default());
                    writer.write_all(&page).ok()?;
                    writer.finish().ok()
                }
                None => {
                    let plain = decoded(Box::new(read::DeflateDecoder::new(page)))?;
                    let page = self.html(&plain)?;
                    let mut writer = write::DeflateEncoder::new(Vec::new(), Compression::default());
                    writer.write_all(&page).ok()?;
                    writer.finish().ok()
                }
            },
            _ => None,
        }
    }
}

/// A URL reference split as RFC 3986 reads it, without decoding anything.
struct UrlParts<'a> {
    /// The authority, when the reference has one (`//host:port/...`).
    host: Option<&'a str>,
    /// The path (before `?` and `#`).
    path: &'a str,
    /// The reference from its path on: path, query and fragment.
    from_path: &'a str,
}

impl<'a> UrlParts<'a> {
    fn split(reference: &'a str) -> Self {
        let mut rest = reference;
        // A scheme: letters, digits, `+`, `-`, `.`, after a letter, before the first `:`
        // that comes before any `/`, `?` or `#`.
        if let Some(colon) = rest.find([':', '/', '?', '#']).filter(|i| rest[*i..].starts_with(':'))
        {
            let scheme = &rest[..colon];
            let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if valid {
                rest = &rest[colon + 1..];
            }
        }
        let mut host = None;
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            host = Some(&after[..end]);
            rest = &after[end..];
        }
        let path = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
        UrlParts { host, path, from_path: rest }
    }
}

/// `path` without empty, `.` and `..` segments (Go's `path.Clean` of a rooted path).
fn clean_path(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            segment => segments.push(segment),
        }
    }
    format!("/{}", segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "/api/v1/namespaces/ns/pods/web/proxy";

    fn rewriter() -> UrlRewriter<'static> {
        UrlRewriter {
            prefix: PREFIX,
            backend_host: "127.64.0.5:8080",
            request_host: "localhost:8001",
        }
    }

    #[test]
    fn urls_of_the_backend_go_through_the_proxy() {
        let url = |target| rewriter().url(target);
        assert_eq!(url("/sub/"), format!("{PREFIX}/sub/"));
        assert_eq!(url("/a/./b/../c?x=1&y=/z#top"), format!("{PREFIX}/a/c?x=1&y=/z#top"));
        assert_eq!(url("/"), format!("{PREFIX}/"));
        assert_eq!(url("http://127.64.0.5:8080/login"), format!("{PREFIX}/login"));
        assert_eq!(url("//127.64.0.5:8080/x"), format!("{PREFIX}/x"));
        // The host the client asked for is kept.
        assert_eq!(url("http://localhost:8001/x"), format!("http://localhost:8001{PREFIX}/x"));
        // Already through the proxy, relative, another host, opaque: as they are.
        let through = format!("{PREFIX}/x");
        assert_eq!(url(&through), through);
        for kept in ["sub/", "../up", "?page=2", "#top", "http://example.com/x", "mailto:a@b.c", ""]
        {
            assert_eq!(url(kept), kept, "{kept}");
        }
        assert_eq!(url("http://127.64.0.5:8080"), "http://127.64.0.5:8080", "no path");
        assert_eq!(url("/%2Fencoded%20path"), format!("{PREFIX}/%2Fencoded%20path"));
    }

    #[test]
    fn an_html_page_s_links_go_through_the_proxy_and_the_rest_is_left_alone() {
        let page = "<!DOCTYPE html>\n<html><head><link rel=stylesheet href=\"/s.css\">\
            <script src='/app.js'></script></head><body><!-- <a href=\"/c\"> -->\
            <a href=\"/sub/\">sub</a> <a href=\"rel\">rel</a> <a data-x=\"/no\">x</a>\
            <img src=\"/i.png\" alt=\"/not-a-url\"><form action=\"/post\"></form>\
            <p>/text</p></body></html>";
        let out = String::from_utf8(rewriter().html(page.as_bytes()).unwrap()).unwrap();
        let expected = page
            .replace("\"/s.css\"", &format!("\"{PREFIX}/s.css\""))
            // A rewritten attribute is written in double quotes.
            .replace("'/app.js'", &format!("\"{PREFIX}/app.js\""))
            .replace("\"/sub/\"", &format!("\"{PREFIX}/sub/\""))
            .replace("\"/i.png\"", &format!("\"{PREFIX}/i.png\""))
            .replace("\"/post\"", &format!("\"{PREFIX}/post\""));
        assert_eq!(out, expected);
    }

    #[test]
    fn compressed_pages_are_rewritten_in_their_encoding() {
        use flate2::{read, write, Compression};
        let page = b"<a href=\"/x\">x</a>";
        let expected = format!("<a href=\"{PREFIX}/x\">x</a>");
        let mut gzip = write::GzEncoder::new(Vec::new(), Compression::default());
        gzip.write_all(page).unwrap();
        let gzipped = rewriter().encoded_html(&gzip.finish().unwrap(), "gzip").unwrap();
        let mut plain = String::new();
        read::GzDecoder::new(&gzipped[..]).read_to_string(&mut plain).unwrap();
        assert_eq!(plain, expected);
        let mut raw = write::DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(page).unwrap();
        let deflated = rewriter().encoded_html(&raw.finish().unwrap(), "deflate").unwrap();
        let mut plain = String::new();
        read::DeflateDecoder::new(&deflated[..]).read_to_string(&mut plain).unwrap();
        assert_eq!(plain, expected);
        assert_eq!(rewriter().encoded_html(b"not gzip", "gzip"), None);
        // A small gzip of a page past the largest rewritten is passed on as it came.
        let mut bomb = write::GzEncoder::new(Vec::new(), Compression::default());
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..=(super::LARGEST_PAGE >> 20) {
            bomb.write_all(&zeros).unwrap();
        }
        let bomb = bomb.finish().unwrap();
        assert!(bomb.len() < 1 << 20);
        assert_eq!(rewriter().encoded_html(&bomb, "gzip"), None);
        assert_eq!(rewriter().encoded_html(page, "br"), None);
    }
}
