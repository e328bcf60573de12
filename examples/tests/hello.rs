//! The hello example driven the way Collie would: `curl --unix-socket`
//! against the example running in its own process.

mod agent;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use agent::{curl, example};

/// The hello process, killed if the test fails before it exits by itself.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn hello_example_prints_the_answer_sent_through_the_socket() {
    let dir = std::env::temp_dir().join(format!("durable-hello-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let socket = dir.join("hello").join("app.sock");
    let socket_s = socket.to_str().unwrap().to_owned();
    let mut child = Command::new(example("hello"))
        .env("COLLIE_DURABLE_SOCKET", &socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the hello example was built by cargo test");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut agent = Agent(child);
    let first = lines.next().expect("a line").expect("utf-8");
    assert_eq!(first, format!("listening {socket_s}"));

    let (status, hello) = curl(&socket_s, &["http://collie/hello"]);
    assert_eq!(status, 200);
    assert_eq!(hello["host"], "hello");
    assert_eq!(hello["ready"], true);
    assert_eq!(hello["caps"]["asks"], true);
    assert_eq!(hello["caps"]["send"], false);

    let (status, state) = curl(&socket_s, &["http://collie/v1/state"]);
    assert_eq!(status, 200);
    let ask = &state["asks"][0];
    assert_eq!(ask["title"], "Deploy to staging?");
    assert_eq!(ask["id"], "f5286b923e30e7081ee2a5464db467ec", "ask_id_for(deploy, deploy-1)");
    let hash = ask["hash"].as_str().unwrap().to_owned();

    let body =
        serde_json::json!({"requestId": "r-1", "answer": {"optionIds": ["yes"]}, "hash": hash}).to_string();
    let url = "http://collie/v1/asks/f5286b923e30e7081ee2a5464db467ec";
    let (status, answered) =
        curl(&socket_s, &["-X", "POST", "-H", "Content-Type: application/json", "--data", &body, url]);
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["result"], "answered");

    let second = lines.next().expect("a second line").expect("utf-8");
    assert_eq!(second, "answer: yes");
    let code = agent.0.wait().expect("exit");
    assert!(code.success(), "hello exits 0, got {code:?}");
    assert!(!socket.exists(), "close() removes the socket file");
    let _ = std::fs::remove_dir_all(&dir);
}
