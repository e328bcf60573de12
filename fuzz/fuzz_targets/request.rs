//! `request`: structured requests — any method, path, query,
//! `If-None-Match`, body and caller — into a core with a layout, asks, a chat
//! handler, an action, hooks, a starter and history, through
//! `Driver::handle`, driven without a runtime (`durable_fuzz::exec`), with the
//! clock moved and deadlines fired in between.
//!
//! Asserts: no panic; every request is answered; every answer is well
//! formed (`durable_fuzz::check::response`: a status of the contract and
//! never a 5xx, a JSON object with `ok`, a failure's code matching its
//! status and carrying its fields, `Allow` on a 405, an `ETag` only on the
//! state); a replay is the first answer again.
#![no_main]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use arbitrary::Arbitrary;
use durable_fuzz::agent::{self, Setup, T0};
use durable_fuzz::check;
use durable_fuzz::exec::Driver;
use durable_fuzz::wire::{BodySel, CallerSel, MethodSel, PathSel, Pool, QKey, QVal, Req};
use durable_runtime::ManualClock;
use durable_runtime::types::Timestamp;
use libfuzzer_sys::fuzz_target;

/// The most steps of one input.
const STEPS_MAX: usize = 24;

#[derive(Debug, Arbitrary)]
enum Step {
    /// A request.
    Request(Req),
    /// The clock moves (ms) and due deadlines fire.
    Advance(u32),
    /// The clock moves past the ask's expiry and the holds' 10 min.
    Later,
    /// The program answers or writes on its side.
    Program(u8),
}

#[derive(Debug, Arbitrary)]
struct Input {
    setup: Setup,
    steps: Vec<Step>,
}

/// Inputs served by one agent before a fresh one is built (building one,
/// with its asks hashed, costs more than most inputs); `DURABLE_FUZZ_FRESH=1`
/// builds one for every input, to replay a finding on its own.
const INPUTS_PER_AGENT: usize = 32;

/// An agent and what the checks remember of its answers.
struct Session {
    agent: agent::Agent,
    driver: Driver,
    pool: Pool,
    receipts: check::Receipts,
    last_etag: Option<String>,
    inputs: usize,
}

impl Session {
    fn new(setup: Setup) -> Session {
        let clock = ManualClock::new(Timestamp::from_millis(T0));
        let agent = agent::build(setup, Arc::new(clock.clone()));
        let mut driver = Driver::new(agent.core.clone(), clock);
        driver.run_jobs();
        Session {
            agent,
            driver,
            pool: Pool::default(),
            receipts: check::Receipts::default(),
            last_etag: None,
            inputs: 0,
        }
    }

    fn run(&mut self, steps: &[Step]) {
        for step in steps.iter().take(STEPS_MAX) {
            match step {
                Step::Request(req) => {
                    let request = req.to_core(&self.pool, self.last_etag.as_deref());
                    let response = self.driver.block_on(self.agent.core.driver().handle(request.clone()), &request);
                    check::response(&request, &response);
                    self.receipts.note(&response);
                    self.pool.harvest(&response.body);
                    if let Some(etag) = &response.etag {
                        self.last_etag = Some(etag.as_str().to_owned());
                    }
                }
                Step::Advance(ms) => self.driver.advance(u64::from(*ms)),
                Step::Later => self.driver.advance(durable_runtime::types::HOLD_MS + 1),
                Step::Program(what) => program(&self.agent.core, *what),
            }
        }
    }
}

thread_local! {
    /// One session per setup.
    static SESSIONS: RefCell<HashMap<Setup, Session>> = RefCell::new(HashMap::new());
    static PER_AGENT: usize = match std::env::var("DURABLE_FUZZ_FRESH").as_deref() {
        Ok("1") => 1,
        _ => INPUTS_PER_AGENT,
    };
}

/// A readable input: one request a line, `METHOD PATH[?QUERY] [BODY]`,
/// from Collie's own process; `advance MS` moves the clock. The seeds are
/// written so (`fuzz/corpus/request/`).
fn script(text: &str) -> Vec<Step> {
    text.lines()
        .filter_map(|line| {
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            if word == "advance" {
                return rest.trim().parse().ok().map(Step::Advance);
            }
            let (target, body) = rest.split_once(' ').unwrap_or((rest, ""));
            let (path, query) = match target.split_once('?') {
                Some((p, q)) => (p, Some(vec![(QKey::Raw(q.to_owned()), QVal::Absent)])),
                None => (target, None),
            };
            Some(Step::Request(Req {
                method: match word {
                    "GET" => MethodSel::Get,
                    "POST" => MethodSel::Post,
                    _ => MethodSel::Other(0),
                },
                path: PathSel::Raw(path.to_owned()),
                query,
                if_none_match: None,
                body: BodySel::Raw(body.as_bytes().to_vec()),
                caller: CallerSel::OtherProcess,
            }))
        })
        .collect()
}

/// Whether an input is a script: it starts with `GET ` or `POST `.
fn is_script(data: &[u8]) -> bool {
    data.starts_with(b"GET ") || data.starts_with(b"POST ")
}

fuzz_target!(|data: &[u8]| {
    let input = if is_script(data) {
        let Ok(text) = std::str::from_utf8(data) else { return };
        Input { setup: Setup::default(), steps: script(text) }
    } else {
        match Input::arbitrary_take_rest(arbitrary::Unstructured::new(data)) {
            Ok(input) => input,
            Err(_) => return,
        }
    };
    let per_agent = PER_AGENT.with(|n| *n);
    SESSIONS.with_borrow_mut(|sessions| {
        let session = sessions.entry(input.setup).or_insert_with(|| Session::new(input.setup));
        if session.inputs >= per_agent {
            *session = Session::new(input.setup);
        }
        session.inputs += 1;
        session.run(&input.steps);
    });
});

/// What the program does meanwhile: closes a pane, raises an ask, writes.
fn program(core: &durable_runtime::Collie, what: u8) {
    let pane = if what & 1 == 0 { "ticket-1" } else { "ticket-2" };
    let Some(p) = core.pane(pane) else { return };
    match what >> 1 & 3 {
        0 => p.close(),
        1 => {
            let spec = durable_runtime::types::AskSpec::text(format!("prog-{what}"), "More?");
            let _ = p.ask(spec);
        }
        2 => {
            let _ = p.write(durable_runtime::types::Item::partial_reply("p", format!("{what}")).expect("id"));
        }
        _ => {
            for id in p.open_asks() {
                let _ = p.decide(&id, durable_runtime::types::Answer::option("no"));
            }
        }
    }
}
