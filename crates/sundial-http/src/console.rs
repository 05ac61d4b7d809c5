//! `GET /`: Sundial's web console, a single page (SQL editor, results grid, chart, tables, CSV
//! upload) that talks to `/exec`, `/imp` and `/status` of the server that served it.
//!
//! The page is built from `console/` at the repository root (see its `build.mjs`) into
//! `crates/sundial-http/console/`, and those built files are compiled into the binary here: no
//! file is read at run time, so only the fixed paths of [`ASSETS`] (and `/`) are answered and no
//! path can reach anything else (`/../Cargo.toml` is just an unknown path: 404).
//!
//! Every answer carries `X-Content-Type-Options: nosniff` and a Content-Security-Policy that lets
//! the page load scripts, styles and connect only to its own origin (no inline scripts or
//! styles, no frames). Assets keep their names from build to build, so they are sent with
//! `Cache-Control: no-cache` and an `ETag` (a hash of the content): the browser revalidates and
//! gets `304 Not Modified` while the binary is the same.
//!
//! The console's routes are outside `origin::refuse_foreign_pages` (and gzip and CORS): its
//! files change nothing and cannot be framed, so a link to the console on another site's page
//! opens it; the requests the page then makes are same-origin and pass the check.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file of the console.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The console's files; the first is the page served at `/`.
static ASSETS: [Asset; 4] = [
    Asset {
        path: "/index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../console/index.html"),
    },
    Asset {
        path: "/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../console/app.js"),
    },
    Asset {
        path: "/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../console/app.css"),
    },
    Asset {
        path: "/THIRD_PARTY_LICENSES.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../console/THIRD_PARTY_LICENSES.txt"),
    },
];

/// Same origin only: no inline script or style, no plugins, no framing, forms and requests to
/// this server only (`data:` images for the page's empty icon).
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
     form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Whether `path` is one of the console's files (served to anyone: the page logs in itself).
pub(crate) fn is_console_path(path: &str) -> bool {
    path == "/" || ASSETS.iter().any(|a| a.path == path)
}

/// `router` with the console's routes: `/` and every asset's path.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    let mut router = router.route("/", get(|headers: HeaderMap| serve(0, headers)));
    for (i, asset) in ASSETS.iter().enumerate() {
        router = router.route(asset.path, get(move |headers: HeaderMap| serve(i, headers)));
    }
    router
}

/// The entity tag of each asset: a hash of its bytes, computed on first use.
fn etag(i: usize) -> &'static HeaderValue {
    static TAGS: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|asset| {
                let mut hasher = DefaultHasher::new();
                asset.body.hash(&mut hasher);
                let tag = format!("\"{:016x}-{:x}\"", hasher.finish(), asset.body.len());
                HeaderValue::from_str(&tag).expect("hex digits are a valid header value")
            })
            .collect()
    });
    &tags[i]
}

/// The asset `i`, or 304 when the browser's copy (`If-None-Match`) is current.
async fn serve(i: usize, headers: HeaderMap) -> Response {
    let asset = &ASSETS[i];
    let tag = etag(i);
    let current = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/").as_bytes() == tag.as_bytes()
        });
    let common = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::ETAG, tag.clone()),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ];
    if current {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        StatusCode::OK,
        common,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        )],
        asset.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A server of the console's routes on a loopback port.
    async fn server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = routes(Router::new());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        addr
    }

    /// Status line, headers (lower-case names) and body of a raw HTTP/1.1 request of `target`
    /// (sent as is: no client normalizes the path).
    async fn get_raw(addr: SocketAddr, target: &str, extra: &str) -> (u16, String, Vec<u8>) {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let split = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete answer");
        let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
        let status = head[9..12].parse().unwrap();
        let body = answer[split + 4..].to_vec();
        (status, head, body)
    }

    fn header_of<'a>(head: &'a str, name: &str) -> Option<&'a str> {
        head.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    }

    #[tokio::test]
    async fn serves_the_page_and_its_assets_with_safe_headers() {
        let addr = server().await;
        for (target, content_type, body) in [
            ("/", "text/html", ASSETS[0].body),
            ("/index.html", "text/html", ASSETS[0].body),
            ("/app.js", "text/javascript", ASSETS[1].body),
            ("/app.css", "text/css", ASSETS[2].body),
            ("/THIRD_PARTY_LICENSES.txt", "text/plain", ASSETS[3].body),
        ] {
            let (status, head, got) = get_raw(addr, target, "").await;
            assert_eq!(status, 200, "{target}");
            assert!(
                header_of(&head, "content-type").is_some_and(|t| t.starts_with(content_type)),
                "{target}: {head}"
            );
            assert_eq!(header_of(&head, "x-content-type-options"), Some("nosniff"));
            assert_eq!(header_of(&head, "cache-control"), Some("no-cache"));
            let csp = header_of(&head, "content-security-policy").unwrap();
            assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
            assert!(!csp.contains("unsafe"), "{csp}");
            assert_eq!(got, body, "{target}");
        }
        let (_, head, _) = get_raw(addr, "/", "").await;
        let page = String::from_utf8_lossy(ASSETS[0].body);
        assert!(page.contains("app.js") && page.contains("app.css"));
        // HEAD answers the headers only.
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"HEAD /app.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200"));
        assert!(answer.ends_with(b"\r\n\r\n"), "no body for HEAD");
        // Revalidation: the same ETag gives 304 without a body, another one the page.
        let tag = header_of(&head, "etag").unwrap().to_string();
        let (status, _, body) = get_raw(addr, "/", &format!("If-None-Match: {tag}\r\n")).await;
        assert_eq!((status, body.len()), (304, 0));
        let (status, _, _) = get_raw(addr, "/", "If-None-Match: \"other\"\r\n").await;
        assert_eq!(status, 200);
    }

    #[tokio::test]
    async fn unknown_paths_and_traversal_are_not_found() {
        let addr = server().await;
        for target in [
            "/nothing",
            "/app.js/",
            "/app.js.map",
            "/console/app.js",
            "/../Cargo.toml",
            "/%2e%2e/Cargo.toml",
            "/%2e%2e%2fCargo.toml",
            "/..%2f..%2fCargo.toml",
            "/./../src/console.rs",
            "//etc/passwd",
            "/index.html%00",
            "/src/console.rs",
            "/Cargo.toml",
        ] {
            let (status, _, body) = get_raw(addr, target, "").await;
            assert!(
                status == 404 || status == 400,
                "{target}: {status} {}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                !String::from_utf8_lossy(&body).contains("[package]"),
                "{target}"
            );
        }
        // Other methods are not served.
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        assert!(
            answer.starts_with(b"HTTP/1.1 405"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }

    /// Through the whole SQL router: pages of other sites may open the console (a link), but
    /// not run statements.
    #[tokio::test]
    async fn other_sites_may_link_to_the_console_but_not_run_sql() {
        let dir = tempfile::tempdir().unwrap();
        let db = sundial_storage::Database::open(dir.path(), Default::default()).unwrap();
        let engine = std::sync::Arc::new(sundial_query::Engine::new(db).unwrap());
        let app = crate::sql_router(crate::HttpSql {
            engine,
            options: crate::HttpOptions::default(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        let cross = "Sec-Fetch-Site: cross-site\r\n";
        assert_eq!(get_raw(addr, "/", cross).await.0, 200);
        assert_eq!(get_raw(addr, "/app.js", cross).await.0, 200);
        assert_eq!(get_raw(addr, "/exec?query=SELECT%201", cross).await.0, 403);
        // The page's own requests.
        let own = "Sec-Fetch-Site: same-origin\r\n";
        let (status, _, body) = get_raw(addr, "/exec?query=SELECT%201", own).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(get_raw(addr, "/nothing", own).await.0, 404);
    }

    #[test]
    fn assets_are_built() {
        // The build writes real bundles; an empty or placeholder file would serve a blank page.
        assert!(ASSETS[1].body.len() > 10_000);
        assert!(ASSETS[2].body.len() > 1_000);
        let page = String::from_utf8_lossy(ASSETS[0].body);
        // The CSP forbids inline scripts and styles: the page must have none.
        assert!(!page.contains("<style") && !page.contains("style="));
        assert!(!page.contains("<script>") && !page.contains("onclick="));
    }
}
