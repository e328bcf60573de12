//! The phone on a terminal: one screen with the agent's workspaces, tabs
//! and panes, the open pane's chat, a card for an open ask, what the agent
//! last answered, and an input line. Keys:
//!
//! - typing and Enter sends the text to the open pane; `:` starts a command
//!   (those of the line interface: `:open ticket-1`, `:action refund`, …);
//! - Ctrl-N / Ctrl-P open the next / previous pane; Ctrl-X stops its turn;
//!   PgUp / PgDn scroll the chat; Ctrl-C quits;
//! - Tab moves to the cards (Tab again: the next card, then back): ↑/↓ move,
//!   Space picks (multi), flips (yes/no) or turns (a select, also ←/→),
//!   typing fills a text, Enter answers; an allow-always pick asks for a
//!   second Enter; Esc leaves the card.

use tokio::time::{Instant, MissedTickBehavior};

use super::answer::Draft;
use super::draw::{self, clean};
use super::model::{self, Ask, FieldType, Kind, Model};
use super::term::{Input, Key, Painter, Raw, Row, read_input, size};
use super::width;
use super::{Command, HELP, POLL, Session, parse_command};

/// How many lines of what happened the screen keeps.
const LOG: usize = 200;

/// Where keys go.
#[derive(Clone, Debug, PartialEq)]
enum Focus {
    Input,
    /// A card being answered.
    Card(Draft),
}

#[derive(Debug)]
struct Ui {
    input: String,
    focus: Focus,
    /// What happened: the changes the polls saw, newest last.
    log: Vec<String>,
    /// The agent's answer to the last write (sent, queued, refused…).
    answer: Option<String>,
    /// Lines shown in place of the chat (help, history) until Esc.
    overlay: Option<(String, Vec<String>)>,
    /// How many lines the chat is scrolled up.
    scroll: usize,
}

impl Ui {
    fn new() -> Ui {
        Ui {
            input: String::new(),
            focus: Focus::Input,
            log: Vec::new(),
            answer: None,
            overlay: None,
            scroll: 0,
        }
    }

    /// Keeps what the screen does not show already: not a card's or an
    /// item's further lines, nor the open pane's chat.
    fn log(&mut self, lines: impl IntoIterator<Item = String>) {
        self.log.extend(lines.into_iter().filter(|l| !l.starts_with("  ") && !l.starts_with('[')));
        let extra = self.log.len().saturating_sub(LOG);
        self.log.drain(..extra);
    }

    /// A command's lines, with the agent's answer to its write (if it made one).
    fn answered(&mut self, mut lines: Vec<String>, outcome: Option<String>) {
        if let Some(outcome) = outcome {
            lines.retain(|l| *l != outcome);
            self.answer = Some(outcome);
        }
        self.log(lines);
    }
}

/// The asks in the order the cards come: the open pane's first.
fn cards(model: &Model) -> Vec<&Ask> {
    let open = model.view.as_ref().map(|v| v.pane.as_str());
    let mut asks: Vec<&Ask> = model.asks.iter().filter(|a| Some(a.pane.as_str()) == open).collect();
    asks.extend(model.asks.iter().filter(|a| Some(a.pane.as_str()) != open));
    asks
}

/// The card under focus, or the first one.
fn shown_card<'a>(model: &'a Model, ui: &Ui) -> Option<(usize, &'a Ask)> {
    let cards = cards(model);
    match &ui.focus {
        Focus::Card(d) => cards.iter().position(|a| a.id == d.ask).map(|n| (n, cards[n])),
        Focus::Input => cards.first().map(|a| (0, *a)),
    }
}

/// A card's lines with the draft's cursor and picks.
fn card_rows(ask: &Ask, draft: Option<&Draft>, now: i128, n: usize, of: usize) -> Vec<Row> {
    let kind = match &ask.kind {
        Kind::Choice(_) => "choice",
        Kind::Multi { .. } => "multi",
        Kind::Text { .. } => "text",
        Kind::Form(_) => "form",
        Kind::Other(k) => k.as_str(),
    };
    let left =
        ask.expires_ms.map(|at| format!(" · expires in {}", draw::time_left(at - now))).unwrap_or_default();
    let hint = if draft.is_some() { "" } else { "  (Tab to answer)" };
    let mut rows = vec![Row::strong(format!(
        " card {}/{of} · ask {} on {} · {}{left}{hint}",
        n + 1,
        ask.short(),
        clean(&ask.pane),
        clean(kind)
    ))];
    rows.push(Row::plain(format!(" {}", clean(&ask.title))));
    if let Some(reason) = &ask.reason {
        rows.extend(draw::clean_lines(reason).into_iter().map(|l| Row::plain(format!("   {l}"))));
    }
    if let Some((_, call)) = &ask.tool {
        rows.push(Row::plain(format!(" tool: {}", clean(call))));
    }
    match &ask.push {
        (Some(t), Some(l)) => rows.push(Row::plain(format!(" push: {} - {}", clean(t), clean(l)))),
        (Some(t), None) | (None, Some(t)) => rows.push(Row::plain(format!(" push: {}", clean(t)))),
        (None, None) => {}
    }
    let cursor = |i: usize| if draft.is_some_and(|d| d.cursor == i) { '>' } else { ' ' };
    match &ask.kind {
        Kind::Choice(options) => {
            for (i, o) in options.iter().enumerate() {
                let dot = if draft.is_some_and(|d| d.cursor == i) { "(o)" } else { "( )" };
                let always = if o.always { "  [always: asks to confirm]" } else { "" };
                rows.push(Row::plain(format!(" {} {dot} {}{always}", cursor(i), clean(&o.label))));
            }
        }
        Kind::Multi { options, min, max } => {
            for (i, o) in options.iter().enumerate() {
                let on = draft.is_some_and(|d| d.picked.get(i) == Some(&true));
                rows.push(Row::plain(format!(
                    " {} [{}] {}",
                    cursor(i),
                    if on { 'x' } else { ' ' },
                    clean(&o.label)
                )));
            }
            rows.push(Row::plain(format!("   pick {min} to {max}")));
        }
        Kind::Text { placeholder, .. } => {
            let text = draft.map(|d| d.text.as_str()).unwrap_or("");
            let shown = if text.is_empty() && draft.is_none() {
                placeholder.as_deref().map(|p| format!("({})", clean(p))).unwrap_or_default()
            } else {
                clean(text)
            };
            rows.push(Row::plain(format!(" {} answer: {shown}", cursor(0))));
        }
        Kind::Form(fields) => {
            for (i, f) in fields.iter().enumerate() {
                let value = draft.and_then(|d| d.fields.get(i)).map(String::as_str).unwrap_or("");
                let shown = match &f.ty {
                    FieldType::Bool => format!("[{}]", if value == "yes" { 'x' } else { ' ' }),
                    FieldType::Select(options) => {
                        let label = options.iter().find(|o| o.id == value).map_or("-", |o| o.label.as_str());
                        format!("< {} >", clean(label))
                    }
                    _ => clean(value),
                };
                let required = if f.required { "*" } else { "" };
                rows.push(Row::plain(format!(" {} {}{required}: {shown}", cursor(i), clean(&f.label))));
            }
        }
        Kind::Other(_) => rows.push(Row::plain(" (a kind this phone cannot answer)")),
    }
    if let Some(d) = draft {
        if d.confirming {
            // The option's own words, not a guess about what it lets through.
            let label = d.answer(ask).ok().and_then(|a| a.always).map_or_else(String::new, |l| clean(&l));
            rows.push(Row::strong(format!(
                " \"{label}\" holds beyond this question. Enter again to confirm, Esc to go back."
            )));
        } else {
            let keys = match &ask.kind {
                Kind::Choice(_) => "Up/Down choose · Enter answers",
                Kind::Multi { .. } => "Up/Down move · Space picks · Enter answers",
                Kind::Text { .. } => "type the answer · Enter sends it",
                Kind::Form(_) => "Up/Down field · type, Space flips, Left/Right turns · Enter sends",
                Kind::Other(_) => "",
            };
            rows.push(Row::plain(format!("   {keys} · Tab next card · Esc back")));
        }
    }
    rows
}

/// The whole screen, and where the cursor goes.
fn frame(model: &Model, ui: &Ui, width: usize, height: usize, now: i128) -> (Vec<Row>, (usize, usize)) {
    let width = width.max(20);
    let height = height.max(8);
    let mut top = Vec::new();
    let host = model.hello.as_ref().map_or("agent".to_owned(), |h| clean(&h.host));
    let ready = if model.epoch.is_none() {
        "not reached yet"
    } else if model.ready {
        "ready"
    } else {
        "starting"
    };
    top.push(Row::strong(format!(
        " {host} · {ready} · {} open ask{} · Ctrl-C quits · :help",
        model.asks.len(),
        if model.asks.len() == 1 { "" } else { "s" }
    )));
    let open = model.view.as_ref().map(|v| v.pane.as_str());
    for ws in &model.workspaces {
        for tab in &ws.tabs {
            top.push(Row::plain(format!(" {} / {}", clean(&ws.title), clean(&tab.title))));
            for id in &tab.panes {
                let Some(p) = model.pane(id) else { continue };
                let mark = if Some(p.id.as_str()) == open { '>' } else { ' ' };
                let asks = match p.open_asks.len() {
                    0 => String::new(),
                    1 => " · 1 ask".into(),
                    n => format!(" · {n} asks"),
                };
                top.push(Row::plain(format!(
                    " {mark} {}  {} · {}{asks}",
                    clean(&p.id),
                    clean(&p.title),
                    clean(&p.state)
                )));
            }
        }
    }
    if !model.closed.is_empty() {
        let list: Vec<String> = model.closed.iter().map(|c| clean(&c.id)).collect();
        top.push(Row::plain(format!(" closed: {}", list.join(", "))));
    }
    if !model.starters.is_empty() {
        let list: Vec<String> =
            model.starters.iter().map(|c| format!("{} ({})", clean(&c.id), clean(&c.label))).collect();
        top.push(Row::plain(format!(" starters: {}", list.join(", "))));
    }

    // The chat's title, and its lines (or the overlay's).
    let (title, body): (String, Vec<String>) = match (&ui.overlay, &model.view) {
        (Some((title, lines)), _) => (format!(" {title} (Esc closes)"), lines.clone()),
        (None, Some(view)) => {
            let pane = model.pane(&view.pane);
            let mut title = format!(" {}", clean(&view.pane));
            if let Some(p) = pane {
                title.push_str(&format!(" · {} · {}", clean(&p.title), clean(&p.state)));
                if let (Some(turn), "working") = (&p.turn_id, p.state.as_str()) {
                    title.push_str(&format!(" (turn {})", clean(turn)));
                }
                if !p.actions.is_empty() {
                    let a: Vec<String> =
                        p.actions.iter().map(|a| format!("[{}] {}", clean(&a.id), clean(&a.label))).collect();
                    title.push_str(&format!(" · actions {} (:action ID)", a.join(" ")));
                }
            }
            let mut lines = Vec::new();
            if view.dropped {
                lines.push(draw::SKIPPED.to_owned());
            }
            for item in &view.items {
                for (n, l) in draw::item_lines(item).into_iter().enumerate() {
                    lines.push(if n == 0 { l } else { format!("  {l}") });
                }
            }
            (title, lines)
        }
        (None, None) => (" no pane open: Ctrl-N, or :open PANE".into(), Vec::new()),
    };

    let cards = cards(model);
    let shown = shown_card(model, ui);
    let draft = match &ui.focus {
        Focus::Card(d) => Some(d),
        Focus::Input => None,
    };
    let mut card: Vec<Row> =
        shown.map(|(n, ask)| card_rows(ask, draft, now, n, cards.len())).unwrap_or_default();

    // Bottom: the latest of the log, then the input line, which shows the
    // end of a long input, where the cursor is.
    let log_rows = 2;
    let input_row = match &ui.focus {
        Focus::Input => format!("> {}", width::tail(&clean(&ui.input), width - 3)),
        Focus::Card(_) => "  (answering a card: Esc to type again)".to_owned(),
    };
    // Squeeze the top when the screen is short (the chat keeps 3 rows), then
    // the card's middle: its first row names it, its last says what Enter does.
    while fixed_len(&top, &card, log_rows) + 3 > height && top.len() > 1 {
        top.pop();
    }
    while fixed_len(&top, &card, log_rows) + 3 > height && card.len() > 2 {
        card.remove(card.len() - 2);
    }
    let chat_rows = height.saturating_sub(fixed_len(&top, &card, log_rows));
    // The chat's lines wrapped to the columns after the margin.
    let body: Vec<String> = body.iter().flat_map(|l| width::wrap(l, width - 1)).collect();
    let mut rows = top;
    rows.push(Row::strong(title));
    let end = body.len().saturating_sub(ui.scroll.min(body.len().saturating_sub(chat_rows)));
    let start = end.saturating_sub(chat_rows);
    let mut chat: Vec<Row> = body[start..end].iter().map(|l| Row::plain(format!(" {l}"))).collect();
    chat.resize(chat_rows, Row::default());
    rows.extend(chat);
    rows.extend(card);
    // The last change, then the agent's answer to the last write.
    rows.push(Row::plain(ui.log.last().map(|l| format!(" {l}")).unwrap_or_default()));
    rows.push(Row::plain(ui.answer.as_ref().map(|l| format!(" agent answered: {l}")).unwrap_or_default()));
    let cursor_col = width::width(&input_row).min(width - 1);
    rows.push(Row::plain(input_row));
    rows.truncate(height);
    let cursor_row = rows.len() - 1;
    (rows, (cursor_col, cursor_row))
}

fn fixed_len(top: &[Row], card: &[Row], log_rows: usize) -> usize {
    top.len() + 1 + card.len() + log_rows + 1
}

/// What a key asks the loop to do.
enum Step {
    Nothing,
    Quit,
    Run(Command),
    Answer { ask: Box<Ask>, answer: super::answer::Answer, confirmed: bool },
}

fn on_key(model: &Model, ui: &mut Ui, key: Key) -> Step {
    if key == Key::Ctrl('c') {
        return Step::Quit;
    }
    let focus = std::mem::replace(&mut ui.focus, Focus::Input);
    match focus {
        Focus::Input => on_input_key(model, ui, key),
        Focus::Card(draft) => {
            let Some(ask) = model.ask(&draft.ask).cloned() else {
                ui.log(["that card is closed".to_owned()]);
                return Step::Nothing;
            };
            on_card_key(model, ui, draft, &ask, key)
        }
    }
}

fn on_input_key(model: &Model, ui: &mut Ui, key: Key) -> Step {
    match key {
        Key::Char(c) => ui.input.push(c),
        Key::Backspace => {
            ui.input.pop();
        }
        Key::Esc => {
            ui.overlay = None;
            ui.input.clear();
        }
        Key::PageUp => ui.scroll += 10,
        Key::PageDown => ui.scroll = ui.scroll.saturating_sub(10),
        Key::Ctrl('x') => return Step::Run(Command::Stop),
        Key::Ctrl('d') if ui.input.is_empty() => return Step::Quit,
        Key::Ctrl(c @ ('n' | 'p')) => {
            let ids: Vec<&str> = model.panes.iter().map(|p| p.id.as_str()).collect();
            if ids.is_empty() {
                return Step::Nothing;
            }
            let open = model.view.as_ref().and_then(|v| ids.iter().position(|id| *id == v.pane));
            let next = match (open, c) {
                (None, 'n') => 0,
                (None, _) => ids.len() - 1,
                (Some(i), 'n') => (i + 1) % ids.len(),
                (Some(i), _) => (i + ids.len() - 1) % ids.len(),
            };
            ui.overlay = None;
            ui.scroll = 0;
            return Step::Run(Command::Open(ids[next].to_owned()));
        }
        Key::Tab | Key::BackTab => {
            let cards = cards(model);
            let pick = if key == Key::Tab { cards.first() } else { cards.last() };
            match pick {
                Some(ask) => ui.focus = Focus::Card(Draft::new(ask)),
                None => ui.log(["no open asks".to_owned()]),
            }
        }
        Key::Enter => {
            let line = std::mem::take(&mut ui.input);
            let line = line.trim();
            if let Some(command) = line.strip_prefix(':') {
                match parse_command(command) {
                    Ok(Command::Quit) => return Step::Quit,
                    Ok(Command::Help) => {
                        ui.overlay = Some(("help".into(), HELP.lines().map(str::to_owned).collect()))
                    }
                    Ok(Command::Open(p)) => {
                        ui.overlay = None;
                        ui.scroll = 0;
                        return Step::Run(Command::Open(p));
                    }
                    Ok(command) => return Step::Run(command),
                    Err(why) => ui.log([why]),
                }
            } else if !line.is_empty() {
                return Step::Run(Command::Send(line.to_owned()));
            }
        }
        _ => {}
    }
    Step::Nothing
}

fn on_card_key(model: &Model, ui: &mut Ui, mut draft: Draft, ask: &Ask, key: Key) -> Step {
    match key {
        Key::Esc => {
            if draft.confirming {
                draft.confirming = false;
                ui.focus = Focus::Card(draft);
            }
            return Step::Nothing;
        }
        Key::Tab | Key::BackTab => {
            let cards = cards(model);
            let at = cards.iter().position(|a| a.id == ask.id).unwrap_or(0);
            let next = if key == Key::Tab { at.checked_add(1) } else { at.checked_sub(1) };
            if let Some(next) = next.and_then(|n| cards.get(n)) {
                ui.focus = Focus::Card(Draft::new(next));
            }
            return Step::Nothing;
        }
        Key::Up => draft.up(ask),
        Key::Down => draft.down(ask),
        Key::Left => draft.cycle(ask, -1),
        Key::Right => draft.cycle(ask, 1),
        Key::Backspace => draft.backspace(ask),
        Key::Char(' ') if !draft.takes_text(ask) => draft.toggle(ask),
        Key::Char(c) => draft.type_char(ask, c),
        Key::Enter => match draft.answer(ask) {
            Ok(answer) if answer.always.is_some() && !draft.confirming => draft.confirming = true,
            Ok(answer) => {
                let confirmed = draft.confirming;
                // Stay on the card until the agent took the answer.
                ui.focus = Focus::Card(draft);
                return Step::Answer { ask: Box::new(ask.clone()), answer, confirmed };
            }
            Err(why) => ui.log([why]),
        },
        _ => {}
    }
    ui.focus = Focus::Card(draft);
    Step::Nothing
}

fn paint(painter: &mut Painter, session: &Session, ui: &mut Ui) {
    // A card whose ask closed goes away.
    if let Focus::Card(d) = &ui.focus {
        if session.model.ask(&d.ask).is_none() {
            ui.focus = Focus::Input;
        }
    }
    let (width, height) = size();
    let (rows, cursor) = frame(&session.model, ui, width, height, model::now_ms());
    painter.paint(&rows, width, cursor);
}

pub(super) async fn run(mut session: Session) -> Result<(), String> {
    let _raw = Raw::enter()?;
    let mut painter = Painter::default();
    let mut ui = Ui::new();
    ui.log([format!("phone: connecting to {}", clean(&session.target()))]);
    paint(&mut painter, &session, &mut ui);
    let start = session.start().await;
    ui.log(start);
    if session.model.view.is_none() {
        if let Some(first) = session.model.panes.first().map(|p| p.id.clone()) {
            let lines = session.exec(Command::Open(first)).await;
            ui.log(lines);
        }
    }
    paint(&mut painter, &session, &mut ui);
    let mut input = read_input();
    let mut polls = tokio::time::interval_at(Instant::now() + POLL, POLL);
    polls.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The time left on a card counts down between polls.
    let mut clock = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tokio::select! {
            got = input.recv() => {
                let key = match got {
                    None => return Ok(()),
                    Some(Input::Resize) => {
                        painter.invalidate();
                        paint(&mut painter, &session, &mut ui);
                        continue;
                    }
                    Some(Input::Key(key)) => key,
                };
                match on_key(&session.model, &mut ui, key) {
                    Step::Nothing => {}
                    Step::Quit => return Ok(()),
                    Step::Run(command) => {
                        paint(&mut painter, &session, &mut ui);
                        let listing = match &command {
                            Command::History(_) | Command::More => Some("history"),
                            Command::Asks => Some("open asks"),
                            Command::Panes => Some("panes"),
                            _ => None,
                        };
                        let lines = session.exec(command).await;
                        match listing {
                            Some(title) => ui.overlay = Some((title.to_owned(), lines)),
                            None => ui.answered(lines, session.take_outcome()),
                        }
                    }
                    Step::Answer { ask, answer, confirmed } => {
                        paint(&mut painter, &session, &mut ui);
                        let lines = session.answer(&ask, answer, confirmed).await;
                        if session.model.ask(&ask.id).is_none() {
                            ui.focus = Focus::Input;
                        }
                        ui.answered(lines, session.take_outcome());
                    }
                }
            }
            _ = polls.tick() => {
                let lines = session.poll().await;
                ui.log(lines);
            }
            _ = clock.tick() => {}
        }
        paint(&mut painter, &session, &mut ui);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model() -> Model {
        let mut m = Model::default();
        let state = json!({"ok": true, "epoch": "e1", "seq": 3, "ready": true, "full": true,
            "workspaces": [{"id": "support", "title": "Support",
                "tabs": [{"id": "support:main", "title": "Tickets", "panes": ["ticket-1"]}]}],
            "panes": [{"id": "ticket-1", "tab": "support:main", "title": "Maria Lopez", "harness": "desk",
                "sessionId": "ticket-1", "state": "idle", "turnId": null, "lastSeq": 0,
                "openAsks": ["a1"], "actions": [{"id": "refund", "label": "Refund"}]}],
            "removed": [], "closed": [], "starters": [],
            "asks": [{"id": "a1", "pane": "ticket-1", "kind": "choice", "title": "escalate wants to run",
                "tool": {"name": "escalate", "call": "escalate(ticket: \"ticket-1\")", "args": []},
                "options": [{"id": "allow", "label": "Allow"}, {"id": "allow-always", "label": "Allow always", "always": true}],
                "hash": "h"}]});
        m.apply_state(&state, None).unwrap();
        m.view = Some(model::View::new("ticket-1"));
        m
    }

    fn text(rows: &[Row]) -> String {
        rows.iter().map(|r| r.text.clone()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn the_screen_shows_panes_chat_card_and_input_in_any_size() {
        let m = model();
        let mut ui = Ui::new();
        ui.input = "hello".into();
        let (rows, cursor) = frame(&m, &ui, 100, 30, 0);
        assert_eq!(rows.len(), 30);
        let t = text(&rows);
        assert!(t.contains("> ticket-1  Maria Lopez · idle · 1 ask"), "{t}");
        assert!(t.contains("[refund] Refund"), "{t}");
        assert!(t.contains("escalate wants to run") && t.contains("( ) Allow always"), "{t}");
        assert_eq!(rows[29].text, "> hello");
        assert_eq!(cursor, (7, 29));
        for (w, h) in [(1, 1), (20, 8), (300, 3), (40, 12)] {
            let (rows, (col, row)) = frame(&m, &ui, w, h, 0);
            assert!(rows.len() <= h.max(8) && row < rows.len() && col < w.max(20), "{w}x{h}");
        }
    }

    #[test]
    fn wide_text_wraps_and_fits_by_columns() {
        let mut m = model();
        let view = m.view.as_mut().unwrap();
        view.items.push(json!({"id": "u", "kind": "user", "text": "héllo 👋 日本語"}));
        view.items.push(
            json!({"id": "r", "kind": "reply", "text": "Got it: 日本語の長い文章です 👋👋👋 e\u{301}tude"}),
        );
        view.dropped = true;
        m.panes[0].title = "マリア・ロペス 👩‍💼".into();
        let mut ui = Ui::new();
        ui.input = "日本語 👋".into();
        let (rows, cursor) = frame(&m, &ui, 30, 30, 0);
        let t = text(&rows);
        // Every row, fitted as the painter does, takes the screen's width.
        for row in &rows {
            assert_eq!(width::width(&width::fit(&row.text, 30)), 30, "{t}");
        }
        // The chat wraps by columns (30 with the margin) and keeps all of it.
        let chat = " agent: Got it:\n 日本語の長い文章です 👋👋👋\n e\u{301}tude\n";
        assert!(t.contains(chat), "{t}");
        assert!(t.contains(" you: héllo 👋 日本語\n"), "{t}");
        assert!(
            t.contains(" Older messages were skipped:\n the durable agent no longer\n keeps them.\n"),
            "{t}"
        );
        let title = rows.iter().position(|r| r.text.starts_with(" ticket-1 · ")).unwrap();
        for row in &rows[title + 1..title + 8] {
            assert!(width::width(&row.text) <= 30, "{t}");
        }
        // The cursor stands after what was typed, in columns.
        assert_eq!(rows[cursor.1].text, "> 日本語 👋");
        assert_eq!(cursor.0, 2 + 6 + 1 + 2);
        // A long input shows its end, the cursor inside the screen.
        ui.input = "日本語".repeat(10);
        let (rows, cursor) = frame(&m, &ui, 30, 30, 0);
        assert_eq!(rows[cursor.1].text, format!("> {}", "語日本".repeat(4) + "語"));
        assert_eq!(cursor.0, 28);
    }

    #[test]
    fn keys_answer_a_card_with_the_second_confirmation() {
        let m = model();
        let mut ui = Ui::new();
        assert!(matches!(on_key(&m, &mut ui, Key::Tab), Step::Nothing));
        assert!(matches!(ui.focus, Focus::Card(_)));
        on_key(&m, &mut ui, Key::Down);
        assert!(matches!(on_key(&m, &mut ui, Key::Enter), Step::Nothing));
        let t = text(&frame(&m, &ui, 120, 30, 0).0);
        assert!(t.contains("Enter again to confirm"), "{t}");
        match on_key(&m, &mut ui, Key::Enter) {
            Step::Answer { answer, confirmed, .. } => {
                assert!(confirmed);
                assert_eq!(answer.body, json!({"optionIds": ["allow-always"]}));
            }
            _ => panic!("the second Enter answers"),
        }
        // Typing then Enter sends; `:` runs a command.
        let mut ui = Ui::new();
        for c in "hi".chars() {
            on_key(&m, &mut ui, Key::Char(c));
        }
        assert!(matches!(on_key(&m, &mut ui, Key::Enter), Step::Run(Command::Send(t)) if t == "hi"));
        for c in ":action refund".chars() {
            on_key(&m, &mut ui, Key::Char(c));
        }
        assert!(matches!(on_key(&m, &mut ui, Key::Enter), Step::Run(Command::Action(a)) if a == "refund"));
        assert!(matches!(on_key(&m, &mut ui, Key::Ctrl('c')), Step::Quit));
    }
}
