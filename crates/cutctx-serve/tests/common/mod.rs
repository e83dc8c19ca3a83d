//! What the serve tests share: a tiny fake provider upstream and a raw HTTP/1.1 client, both
//! on blocking std sockets bound to 127.0.0.1, so that every byte on each side can be checked.
#![allow(dead_code, reason = "each test file uses its own part of this module")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request the fake upstream received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the upstream received JSON")
    }
}

/// What the fake upstream answers.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A whole response with a content-length.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A streamed response (no content-length; ends when the connection closes), one write
    /// per chunk, `gap` between them.
    Stream {
        headers: Vec<(String, String)>,
        chunks: Vec<Vec<u8>>,
        gap: Duration,
    },
    /// Headers promising `promised` bytes, then `sent`, then the connection is closed.
    Cut { promised: usize, sent: Vec<u8> },
    /// Wait, then answer.
    Late(Duration, Box<Reply>),
}

impl Reply {
    pub(crate) fn json(status: u16, body: &serde_json::Value) -> Self {
        Self::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }
}

type Behaviour = dyn Fn(&Received, usize) -> Reply + Send + Sync;

/// The fake upstream: one thread per connection, every request recorded.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    pub(crate) received: Arc<Mutex<Vec<Received>>>,
    /// Streams whose client went away before their last chunk.
    pub(crate) cancelled: Arc<AtomicUsize>,
    /// Requests being answered right now, and the most at once.
    pub(crate) in_flight: Arc<AtomicUsize>,
    pub(crate) most_in_flight: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    /// Starts one answering each request (and its index) as `behaviour` says.
    pub(crate) fn start(
        behaviour: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let received = Arc::new(Mutex::new(Vec::new()));
        let cancelled = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most_in_flight = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let behaviour: Arc<Behaviour> = Arc::new(behaviour);
        {
            let (received, cancelled, stop) = (received.clone(), cancelled.clone(), stop.clone());
            let (in_flight, most) = (in_flight.clone(), most_in_flight.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (received, cancelled, behaviour) =
                                (received.clone(), cancelled.clone(), behaviour.clone());
                            let (in_flight, most) = (in_flight.clone(), most.clone());
                            std::thread::spawn(move || {
                                serve_one(
                                    stream,
                                    &received,
                                    &cancelled,
                                    &*behaviour,
                                    &in_flight,
                                    &most,
                                )
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            });
        }
        Self {
            addr,
            received,
            cancelled,
            in_flight,
            most_in_flight,
            stop,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn requests(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve_one(
    stream: TcpStream,
    received: &Mutex<Vec<Received>>,
    cancelled: &AtomicUsize,
    behaviour: &Behaviour,
    in_flight: &AtomicUsize,
    most: &AtomicUsize,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut out = stream;
    // One request per connection: every answer closes it.
    let Some(req) = read_request(&mut reader) else {
        return;
    };
    let n = {
        let mut r = received.lock().expect("lock");
        r.push(req.clone());
        r.len() - 1
    };
    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    most.fetch_max(now, Ordering::SeqCst);
    let mut reply = behaviour(&req, n);
    // In flight while it is being answered: until its answer starts to go out.
    while let Reply::Late(d, r) = reply {
        std::thread::sleep(d);
        reply = *r;
    }
    in_flight.fetch_sub(1, Ordering::SeqCst);
    write_reply(&mut out, reply, cancelled);
}

fn write_reply(out: &mut TcpStream, reply: Reply, cancelled: &AtomicUsize) {
    match reply {
        Reply::Late(d, r) => {
            std::thread::sleep(d);
            write_reply(out, *r, cancelled);
        }
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(&body);
        }
        Reply::Stream {
            headers,
            chunks,
            gap,
        } => {
            let mut head = "HTTP/1.1 200 OK\r\nconnection: close\r\n".to_owned();
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = out.write_all(head.as_bytes());
            for c in chunks {
                if out.write_all(&c).and_then(|()| out.flush()).is_err() {
                    cancelled.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(gap);
            }
        }
        Reply::Cut { promised, sent } => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {promised}\r\n\r\n"
            );
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(&sent);
            let _ = out.flush();
        }
    }
    let _ = out.shutdown(std::net::Shutdown::Both);
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Received> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let headers = read_headers(reader)?;
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}

fn read_headers(reader: &mut impl BufRead) -> Option<Vec<(String, String)>> {
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            return Some(headers);
        }
        let (k, v) = line.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
}

/// A response as the client read it.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// Whether the body ended as its framing says (not cut).
    pub(crate) complete: bool,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON response")
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request and opens the response's head; the stream is left at the body.
pub(crate) fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, BufReader<TcpStream>) {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut w = stream.try_clone().expect("clone");
    w.write_all(head.as_bytes()).expect("write");
    w.write_all(body).expect("write");
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let headers = read_headers(&mut reader).expect("headers");
    (code, headers, reader)
}

/// Sends one request and reads the whole response.
pub(crate) fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let (status, headers, mut reader) = send(addr, method, path, headers, body);
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let mut body = Vec::new();
    let complete = if chunked {
        dechunk(&mut reader, &mut body)
    } else if let Some(n) = length {
        body.resize(n, 0);
        reader.read_exact(&mut body).is_ok()
    } else {
        reader.read_to_end(&mut body).is_ok()
    };
    Response {
        status,
        headers,
        body,
        complete,
    }
}

/// Reads a chunked body into `body`; whether it ended with its last chunk.
fn dechunk(reader: &mut impl BufRead, body: &mut Vec<u8>) -> bool {
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return false;
        }
        let Ok(n) = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16) else {
            return false;
        };
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            return true;
        }
        let mut chunk = vec![0; n + 2];
        if reader.read_exact(&mut chunk).is_err() {
            return false;
        }
        chunk.truncate(n);
        body.extend_from_slice(&chunk);
    }
}

/// A proxy on a free port in front of `upstream` (both providers), in memory unless `edit`
/// says otherwise.
pub(crate) fn proxy(
    upstream: &Upstream,
    edit: impl FnOnce(&mut cutctx_serve::ServeOptions),
) -> cutctx_serve::Running {
    let mut o = cutctx_serve::ServeOptions::new("127.0.0.1:0");
    o.openai_upstream = Some(upstream.url());
    o.anthropic_upstream = Some(upstream.url());
    o.state = cutctx_serve::StateSpec::Memory;
    edit(&mut o);
    cutctx_serve::start(o).expect("the proxy starts")
}

/// A scratch directory of its own for one test.
pub(crate) fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cutctx-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}
