//! The routes that wait on the program or the store (writes, answers,
//! `POST /hello`, history): [`route`] hands a request to its handler once
//! the machine's gate let it through.

use durable_types::exchange::{Request, Response};
use durable_types::{CloseBody, ErrorCode, PlainBody, RenameBody, ReopenBody, StarterBody, SteerBody};

use crate::core::Collie;
use durable_core::history::HistoryRoute;
use durable_core::phone_writes::PhoneWrite;
use durable_core::request::{body, path_id};
use durable_core::respond;
use durable_core::routes::{Route, answered, gate, read_now};

/// Answers one request (inside its span, `routes::request_span`).
pub(crate) async fn route(core: &Collie, req: Request) -> Response {
    let gated = gate(core.lock().machine(), &req.method, &req.path, req.caller);
    let response = match gated {
        Ok(route) => dispatch(core, route, &req).await.unwrap_or_else(|resp| resp),
        Err(refused) => refused,
    };
    answered(&response);
    response
}

/// Hands the request to its route's handler, with the path ids and the body
/// parsed to the route's types (path ids first, then the body).
async fn dispatch(core: &Collie, route: Route<'_>, req: &Request) -> Result<Response, Response> {
    if let Some(read) = req.as_read() {
        if let Some(answered) = read_now(core.lock().machine_mut(), route, &read) {
            return answered;
        }
    }
    // When a write came, for its receipt and events; a read needs no clock.
    let arrival = || core.now();
    Ok(match route {
        Route::Hello => durable_core::poll::hello_post(core.lock().machine_mut(), body(req)?),
        // The gate lets only a GET through to these, answered above; should
        // that change, an error rather than a panic.
        Route::State | Route::Events(_) => {
            return Err(respond::error(ErrorCode::Internal, "a read reached the write path"));
        }
        Route::History => crate::history::serve(core, req, HistoryRoute::Rows).await,
        Route::Conversation(s) => {
            crate::history::serve(core, req, HistoryRoute::Conversation(s.into())).await
        }
        Route::Answer(a) => {
            let ask_id = path_id(a, "ask id")?;
            crate::answer::answer(core, ask_id, body(req)?).await
        }
        Route::Send(p) => {
            let pane = path_id(p, "pane")?;
            crate::writes::send(core, pane, body(req)?, arrival()).await
        }
        Route::Steer(p) => {
            let pane = path_id(p, "pane")?;
            let SteerBody { request_id, text, .. } = body(req)?;
            let write = PhoneWrite::Steer { pane, text };
            crate::writes::phone_write(core, request_id, write, arrival()).await
        }
        Route::Stop(p) => {
            let pane = path_id(p, "pane")?;
            let PlainBody { request_id, .. } = body(req)?;
            let write = PhoneWrite::Stop { pane };
            crate::writes::phone_write(core, request_id, write, arrival()).await
        }
        Route::Action(p, a) => {
            let (pane, action) = (path_id(p, "pane")?, path_id(a, "action")?);
            let PlainBody { request_id, .. } = body(req)?;
            let write = PhoneWrite::Action { pane, action };
            crate::writes::phone_write(core, request_id, write, arrival()).await
        }
        Route::Rename => {
            let RenameBody { request_id, target, id, title, .. } = body(req)?;
            crate::writes::phone_write(core, request_id, PhoneWrite::Rename { target, id, title }, arrival())
                .await
        }
        Route::Close => {
            let CloseBody { request_id, target, id, .. } = body(req)?;
            crate::writes::phone_write(core, request_id, PhoneWrite::Close { target, id }, arrival()).await
        }
        Route::Reopen => {
            let ReopenBody { request_id, id, .. } = body(req)?;
            crate::writes::phone_write(core, request_id, PhoneWrite::Reopen { id }, arrival()).await
        }
        Route::Starter(s) => {
            let starter = path_id(s, "starter")?;
            let StarterBody { request_id, text, .. } = body(req)?;
            let write = PhoneWrite::Starter { starter, text };
            crate::writes::phone_write(core, request_id, write, arrival()).await
        }
    })
}
