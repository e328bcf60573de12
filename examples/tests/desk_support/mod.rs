//! Runs the desk example as a child process on a fresh data folder and
//! drives it the way Collie would: `curl --unix-socket` (or `curl -k` over
//! HTTPS), polling with a deadline.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../user/mod.rs"]
mod user;
#[allow(unused_imports)] // each test binary uses what it needs
pub use user::{as_user, unprivileged};

/// `target/<profile>/examples/desk`, built by `cargo test` beside this test.
pub fn desk_binary() -> PathBuf {
    let mut dir = std::env::current_exe().expect("test exe");
    dir.pop(); // the test binary
    dir.pop(); // deps
    dir.join("examples").join("desk")
}

/// A fresh folder under the temp dir, removed at drop.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(name: &str) -> TestDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "desk-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }

    pub fn socket(&self) -> String {
        self.0.join("s").join("app.sock").to_str().unwrap().to_owned()
    }

    pub fn data(&self) -> String {
        self.0.join("data").to_str().unwrap().to_owned()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the test reaches the desk.
#[derive(Clone)]
enum Via {
    Socket(String),
    Https { base: String, token: String },
}

/// A running desk.
pub struct Desk {
    pub child: Child,
    via: Via,
    pub address: String,
    /// The user the desk runs as, when not this process's (its callers run as it too).
    user: Option<u32>,
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first line the desk prints, or a failure after 30 s.
fn listening_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        for _ in lines {} // keep draining
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("the desk prints `listening <address>`")
}

impl Desk {
    /// Starts the desk on the test dir's socket and data folder.
    pub fn start(dir: &TestDir, extra: &[&str]) -> Desk {
        Desk::start_as(dir, None, extra)
    }

    /// Starts the desk as `user` (its test folder handed to that user).
    pub fn start_as(dir: &TestDir, user: Option<u32>, extra: &[&str]) -> Desk {
        Desk::start_with(dir, user, &[], extra)
    }

    /// Starts the desk as `user` with these environment variables (no
    /// `DESK_RECEIPTS_URL` but one given here: the receipts stay in the
    /// data folder unless the test says otherwise).
    pub fn start_with(dir: &TestDir, user: Option<u32>, env: &[(&str, &str)], extra: &[&str]) -> Desk {
        if let Some(uid) = user {
            std::os::unix::fs::chown(&dir.0, Some(uid), Some(uid)).unwrap();
        }
        let socket = dir.socket();
        let mut child = as_user(user, desk_binary())
            .args(["--socket", &socket, "--data", &dir.data()])
            .args(extra)
            .env_remove("COLLIE_DURABLE_SOCKET")
            .env_remove("DESK_RECEIPTS_URL")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the desk example was built by cargo test");
        let line = listening_line(&mut child);
        assert_eq!(line, format!("listening {socket}"));
        Desk { child, via: Via::Socket(socket.clone()), address: socket, user }
    }

    /// Starts the desk over HTTPS with a self-signed certificate on a free port.
    pub fn start_https(dir: &TestDir, token: &str, extra: &[&str]) -> Desk {
        let mut child = Command::new(desk_binary())
            .args(["--listen", "127.0.0.1:0", "--self-signed", "--data", &dir.data()])
            .args(extra)
            .env("COLLIE_TOKEN", token)
            .env_remove("COLLIE_TOKEN_NEXT")
            .env_remove("DESK_RECEIPTS_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the desk example was built by cargo test");
        let line = listening_line(&mut child);
        let address = line.strip_prefix("listening ").expect("listening <address>").to_owned();
        assert!(address.starts_with("https://127.0.0.1:"), "{address}");
        Desk {
            child,
            via: Via::Https { base: address.clone(), token: token.to_owned() },
            address,
            user: None,
        }
    }

    /// `SIGKILL`, as a crash.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn curl(&self, args: &[&str], path: &str) -> (u16, Value) {
        let (status, body, _) = self.curl_all(args, path);
        (status, body)
    }

    /// The status, the JSON body, and the `Durable-Delivery` header (empty when absent).
    fn curl_all(&self, args: &[&str], path: &str) -> (u16, Value, String) {
        let mut cmd = as_user(self.user, "curl");
        cmd.args(["-sS", "--max-time", "20", "-w", "\n%header{durable-delivery}\n%{http_code}"]);
        let url = match &self.via {
            Via::Socket(s) => {
                cmd.args(["--unix-socket", s]);
                format!("http://desk{path}")
            }
            Via::Https { base, token } => {
                cmd.args(["-k", "-H", &format!("Authorization: Bearer {token}")]);
                format!("{base}{path}")
            }
        };
        let out = cmd.args(args).arg(url).output().expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let (rest, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        let (body, delivery) = rest.rsplit_once('\n').unwrap_or((rest, ""));
        let body = serde_json::from_str(body).unwrap_or(Value::Null);
        (code.trim().parse().unwrap_or(0), body, delivery.trim().to_owned())
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.curl(&[], path)
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let body = body.to_string();
        self.curl(&["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body], path)
    }

    /// A POST, with the `Durable-Delivery` header of its answer (a replayed
    /// send's, §9.1; `None` when absent).
    pub fn post_delivery(&self, path: &str, body: Value) -> (u16, Value, Option<String>) {
        let body = body.to_string();
        let args = ["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", &body];
        let (status, json, delivery) = self.curl_all(&args, path);
        (status, json, Some(delivery).filter(|d| !d.is_empty()))
    }

    pub fn state(&self) -> Value {
        let (status, state) = self.get("/v1/state");
        assert_eq!(status, 200, "{state}");
        state
    }

    pub fn pane<'a>(state: &'a Value, id: &str) -> Option<&'a Value> {
        state["panes"].as_array()?.iter().find(|p| p["id"] == id)
    }

    /// Every event of a pane from the start (the tail is large enough here).
    pub fn events(&self, pane: &str) -> Vec<Value> {
        let (status, page) = self.get(&format!("/v1/panes/{pane}/events?after=0"));
        assert_eq!(status, 200, "{page}");
        page["events"].as_array().cloned().unwrap_or_default()
    }

    /// The pane's view: items in order of first appearance, a known id replaced in place.
    /// A snapshot (a pane restored after a restart over items written
    /// first, §9.2) gives them as they stand.
    pub fn items(&self, pane: &str) -> Vec<Value> {
        let (status, page) = self.get(&format!("/v1/panes/{pane}/events?after=0"));
        assert_eq!(status, 200, "{page}");
        view_of(&page)
    }

    /// The item with this id in the pane's view.
    pub fn item(&self, pane: &str, id: &str) -> Option<Value> {
        self.items(pane).into_iter().find(|i| i["id"] == id)
    }

    /// Polls every 20 ms, up to 10 s, until `f` gives a value.
    pub fn wait_for<T>(&self, what: &str, mut f: impl FnMut(&Desk) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for a final (not partial) item whose text is `text`.
    pub fn wait_text(&self, pane: &str, text: &str) -> Value {
        self.wait_for(&format!("{text:?} in {pane}"), |d| {
            d.items(pane).into_iter().find(|i| i["text"] == text && i.get("partial").is_none())
        })
    }

    /// Waits for the pane to be idle.
    pub fn wait_idle(&self, pane: &str) {
        self.wait_for(&format!("{pane} idle"), |d| {
            let state = d.state();
            (Desk::pane(&state, pane)?["state"] == "idle").then_some(())
        })
    }

    /// The open ask of a pane (waits for it).
    pub fn wait_ask(&self, pane: &str) -> Value {
        self.wait_for(&format!("an open ask on {pane}"), |d| {
            d.state()["asks"].as_array()?.iter().find(|a| a["pane"] == pane).cloned()
        })
    }

    pub fn send(&self, pane: &str, request_id: &str, text: &str) -> (u16, Value) {
        self.post(&format!("/v1/panes/{pane}/send"), json!({"requestId": request_id, "text": text}))
    }

    pub fn answer(&self, ask: &Value, request_id: &str, answer: Value) -> (u16, Value) {
        self.post(
            &format!("/v1/asks/{}", ask["id"].as_str().unwrap()),
            json!({"requestId": request_id, "answer": answer, "hash": ask["hash"]}),
        )
    }
}

/// One write the phone makes: its route and its body (the request id inside).
#[derive(Clone)]
pub struct Write {
    pub path: String,
    pub body: Value,
}

impl Write {
    pub fn id(&self) -> String {
        self.body["requestId"].as_str().unwrap().to_owned()
    }
}

/// Writes of several kinds: `sends` sends on ticket-1, then `n` renames of
/// it and `n` new tickets.
pub fn mixed_writes(sends: usize, n: usize) -> Vec<Write> {
    let mut out = Vec::new();
    for i in 0..sends {
        let body = json!({"requestId": format!("snd-{i}"), "text": format!("message {i}")});
        out.push(Write { path: "/v1/panes/ticket-1/send".into(), body });
    }
    for i in 0..n {
        let rename = json!({"requestId": format!("ren-{i}"), "target": "pane", "id": "ticket-1", "title": format!("Maria {i}")});
        out.push(Write { path: "/v1/rename".into(), body: rename });
        out.push(Write {
            path: "/v1/starters/new-ticket".into(),
            body: json!({"requestId": format!("new-{i}")}),
        });
    }
    out
}

/// Posts every write twice at once, from four threads in two orders: the
/// answers, by request id.
pub fn post_twice_at_once(
    desk: &Desk,
    all: &[Write],
) -> std::collections::HashMap<String, Vec<(u16, Value)>> {
    let mut answers: std::collections::HashMap<String, Vec<(u16, Value)>> = std::collections::HashMap::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || {
                    let mut order: Vec<&Write> = all.iter().collect();
                    if t % 2 == 1 {
                        order.reverse();
                    }
                    let half = order.len() / 2;
                    let mine = if t < 2 { order[..half].to_vec() } else { order[half..].to_vec() };
                    mine.into_iter().map(|w| (w.id(), desk.post(&w.path, w.body.clone()))).collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (id, answer) in h.join().unwrap() {
                answers.entry(id).or_default().push(answer);
            }
        }
    });
    answers
}

/// The first answer of each acknowledged write. A write answered once is
/// answered twice, one of them replayed and otherwise the same; one refused
/// both times (a full queue) promised nothing and is left out.
pub fn acknowledged(
    answers: &std::collections::HashMap<String, Vec<(u16, Value)>>,
) -> std::collections::HashMap<String, Value> {
    let mut out = std::collections::HashMap::new();
    for (id, got) in answers {
        assert_eq!(got.len(), 2, "{id}");
        let ok: Vec<&Value> = got.iter().filter(|(s, _)| *s == 200).map(|(_, b)| b).collect();
        if ok.is_empty() {
            continue;
        }
        assert_eq!(ok.len(), 2, "{id}: a duplicate of an acknowledged write is acknowledged too: {got:?}");
        let firsts: Vec<&&Value> = ok.iter().filter(|b| b["replayed"] == false).collect();
        assert_eq!(firsts.len(), 1, "{id}: exactly one ran: {got:?}");
        let mut first = (*firsts[0]).clone();
        first["replayed"] = json!(true);
        let replayed = ok.iter().find(|b| b["replayed"] == true).map(|b| (*b).clone()).unwrap();
        assert_eq!(replayed, first, "{id}");
        out.insert(id.clone(), (*firsts[0]).clone());
    }
    out
}

/// Replays every acknowledged write until each send is `done` or `closed`
/// (within 30 s): each replay must be the first answer, replayed, and a
/// send's must say where it stands (`Durable-Delivery`). Returns each
/// send's last delivery state.
pub fn replay_until_settled(
    desk: &Desk,
    all: &[Write],
    acknowledged: &std::collections::HashMap<String, Value>,
) -> std::collections::HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut deliveries = std::collections::HashMap::new();
    for w in all.iter().filter(|w| acknowledged.contains_key(&w.id())) {
        let mut expected = acknowledged[&w.id()].clone();
        expected["replayed"] = json!(true);
        loop {
            let (status, again, delivery) = desk.post_delivery(&w.path, w.body.clone());
            assert_eq!(status, 200, "{}: {again}", w.id());
            assert_eq!(again, expected, "{}: the first answer, replayed", w.id());
            if !w.id().starts_with("snd-") {
                assert!(delivery.is_none(), "{}", w.id());
                break;
            }
            let delivery = delivery.expect("a send's replay says where it stands (Durable-Delivery)");
            if delivery == "done" || delivery == "closed" {
                deliveries.insert(w.id(), delivery);
                break;
            }
            assert!(Instant::now() < deadline, "{} still {delivery}", w.id());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    deliveries
}

/// The items of a page of a pane's events from 0: a snapshot's items, or
/// each item event's newest form in order of first appearance.
pub fn view_of(page: &Value) -> Vec<Value> {
    if page["snapshot"] == true {
        return page["items"].as_array().cloned().unwrap_or_default();
    }
    let mut view: Vec<Value> = Vec::new();
    for e in page["events"].as_array().cloned().unwrap_or_default() {
        if e["type"] == "item" {
            let item = e["item"].clone();
            match view.iter_mut().find(|i| i["id"] == item["id"]) {
                Some(slot) => *slot = item,
                None => view.push(item),
            }
        }
    }
    view
}
