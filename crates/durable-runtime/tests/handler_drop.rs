//! A handler the program lets go of (replaced by another, or its pane
//! forgotten) is dropped once the core's lock is gone: its `Drop` may call
//! the core. Under the lock it would wait for itself for ever.
use durable_runtime::test_util as harness;

use std::sync::mpsc;
use std::time::Duration;

use durable_runtime::{ActionHandler, ActionRequest, ChatHandler, Collie, HandlerResult, Turn};
use harness::Harness;

/// Looks at the core when it is dropped, as a handler holding a pane or a
/// kept ask may.
#[derive(Clone)]
struct LooksAtTheCoreOnDrop(Collie);

impl ChatHandler for LooksAtTheCoreOnDrop {
    async fn turn(&self, _turn: Turn) {}
}

impl ActionHandler for LooksAtTheCoreOnDrop {
    async fn action(&self, _req: ActionRequest) -> HandlerResult {
        Ok(())
    }
}

impl Drop for LooksAtTheCoreOnDrop {
    fn drop(&mut self) {
        let _ = self.0.pane("ticket-1").map(|p| p.is_open());
        let _ = self.0.caps();
    }
}

/// Runs `steps` on a thread of its own; a deadlock fails the test instead
/// of hanging it.
fn finishes(steps: impl FnOnce() + Send + 'static) {
    let (done, wait) = mpsc::channel();
    std::thread::spawn(move || {
        steps();
        let _ = done.send(());
    });
    wait.recv_timeout(Duration::from_secs(20))
        .expect("a handler's Drop that calls the core never returned: it ran under the core's lock");
}

#[test]
fn a_replaced_pane_handler_is_dropped_outside_the_lock() {
    finishes(|| {
        let h = Harness::new();
        let pane = h.pane();
        let handler = LooksAtTheCoreOnDrop(h.core.clone());
        pane.on_send(handler.clone()).unwrap();
        pane.on_send(handler.clone()).unwrap();
        pane.on_action(handler.clone()).unwrap();
        pane.on_action(handler).unwrap();
        assert!(pane.is_open());
    });
}

#[test]
fn a_replaced_agent_wide_handler_or_hook_is_dropped_outside_the_lock() {
    finishes(|| {
        let h = Harness::new();
        let handler = LooksAtTheCoreOnDrop(h.core.clone());
        h.core.on_send(handler.clone());
        h.core.on_send(handler.clone());
        h.core.on_action(handler.clone());
        h.core.on_action(handler.clone());
        let hook_holder = handler.clone();
        h.core.on_rename(move |_req| {
            let _keep = &hook_holder;
            async { Ok(()) }
        });
        h.core.on_rename(|_req| async { Ok(()) });
        drop(handler);
    });
}
