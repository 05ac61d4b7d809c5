//! Requests from web pages of other origins are refused, unless the operator allows them.
//!
//! A page open in a browser can make the browser send a request to any address, the server's
//! loopback port included: `<img src="http://localhost:9000/exec?query=DROP TABLE t">` needs
//! no script, and a form can POST lines to `/write`. The page cannot read the answer without
//! CORS headers, but the statement would run all the same. So every request a browser sends
//! for a page of another origin is refused with 403 before any handler sees it:
//!
//! * its `Origin` header names another origin than the one the request is addressed to
//!   (`Host`), and not one of `--http-allowed-origins`; or
//! * it has no `Origin` (browsers leave it out of simple GETs) but `Sec-Fetch-Site` says the
//!   page is of another site or origin (`cross-site`, `same-site`), which every current
//!   browser sends with every request.
//!
//! Clients that are not browsers (curl, QuestDB's and InfluxDB's clients, TSBS) send neither
//! header and are served as before, as are pages of the server's own origin and of the allowed
//! ones. Answers carry CORS headers only for allowed origins (none by default), so pages of
//! other origins cannot read them either.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::json::write_json_string;

/// The origins (`scheme://host[:port]`) whose pages may use the server, besides its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins {
    /// `*`: any origin.
    any: bool,
    /// Lower case, without a trailing `/`.
    origins: Vec<String>,
}

impl AllowedOrigins {
    /// A comma-separated list of origins, or `*` for any; empty for none.
    pub fn parse(text: &str) -> AllowedOrigins {
        let mut allowed = AllowedOrigins::default();
        for origin in text.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            if origin == "*" {
                allowed.any = true;
            } else {
                allowed
                    .origins
                    .push(origin.trim_end_matches('/').to_ascii_lowercase());
            }
        }
        allowed
    }

    pub fn is_empty(&self) -> bool {
        !self.any && self.origins.is_empty()
    }

    pub fn any(&self) -> bool {
        self.any
    }

    /// The origins as given (lower case).
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    fn allows(&self, origin: &str) -> bool {
        self.any
            || self
                .origins
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin.trim_end_matches('/')))
    }
}

/// Why a request must be refused, if a page of a foreign origin sent it.
pub fn foreign(headers: &HeaderMap, allowed: &AllowedOrigins) -> Option<String> {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    match text(header::ORIGIN) {
        Some(origin) => {
            if allowed.allows(origin) || is_same_origin(origin, text(header::HOST)) {
                None
            } else {
                Some(format!(
                    "requests from pages of origin '{origin}' are refused: it is not this \
                     server's origin nor one of --http-allowed-origins"
                ))
            }
        }
        None => match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
            Some(site)
                if site.eq_ignore_ascii_case("cross-site")
                    || site.eq_ignore_ascii_case("same-site") =>
            {
                Some(format!(
                    "requests from pages of other origins are refused (Sec-Fetch-Site: {site}); \
                     allow an origin with --http-allowed-origins"
                ))
            }
            _ => None,
        },
    }
}

/// Whether `origin` (`scheme://host[:port]`) is the origin the request was sent to.
fn is_same_origin(origin: &str, host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    let Some((_, authority)) = origin.split_once("://") else {
        return false;
    };
    authority.eq_ignore_ascii_case(host)
}

/// Middleware: answers 403 to requests of foreign pages (see the module docs).
pub async fn refuse_foreign_pages(
    State(allowed): State<AllowedOrigins>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(why) = foreign(request.headers(), &allowed) {
        let mut body = Vec::with_capacity(why.len() + 16);
        body.extend_from_slice(b"{\"error\":");
        write_json_string(&mut body, &why);
        body.push(b'}');
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, crate::json::CONTENT_TYPE)],
            body,
        )
            .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn foreign_pages_are_told_apart() {
        let none = AllowedOrigins::default();
        let one = AllowedOrigins::parse("https://console.example.com, http://localhost:3000/");
        // Clients that are not browsers.
        assert!(foreign(&headers(&[("host", "localhost:9000")]), &none).is_none());
        // The server's own pages.
        let own = headers(&[
            ("host", "localhost:9000"),
            ("origin", "http://localhost:9000"),
        ]);
        assert!(foreign(&own, &none).is_none());
        let typed = headers(&[("host", "localhost:9000"), ("sec-fetch-site", "none")]);
        assert!(foreign(&typed, &none).is_none());
        // Another origin, allowed or not.
        let other = headers(&[
            ("host", "localhost:9000"),
            ("origin", "http://localhost:3000"),
        ]);
        assert!(foreign(&other, &none).is_some());
        assert!(foreign(&other, &one).is_none());
        assert!(foreign(&other, &AllowedOrigins::parse("*")).is_none());
        let evil = headers(&[
            ("host", "127.0.0.1:9000"),
            ("origin", "https://evil.example"),
        ]);
        assert!(foreign(&evil, &one).is_some());
        assert!(foreign(&headers(&[("origin", "null")]), &none).is_some());
        // A simple GET from an <img> of another site carries no Origin.
        for site in ["cross-site", "same-site"] {
            let img = headers(&[("host", "localhost:9000"), ("sec-fetch-site", site)]);
            assert!(foreign(&img, &none).is_some(), "{site}");
        }
    }
}
