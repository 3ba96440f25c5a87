//! The MCP server of `hcp mcp`: `tools/list` from the runtime's catalog, filtered for the
//! server's principal (`hcp_runtime::mcp`), `tools/call` through the runtime's pipeline
//! with [`Face::Mcp`], the same path as `hcp exec --envelope`, and the person asked
//! through the client's elicitation where the call needs them (`hcp_runtime::confirm`).
//!
//! Errors are split as the MCP specification splits them: an unknown tool or a malformed
//! request is a JSON-RPC error; everything the gate or the verb answers (a refusal with its
//! code, a failed run) is a tool result with `isError: true`.
//!
//! Revisions (RUNTIME §10, "Revisions"): [`SUPPORTED`]. Under 2025-06-18 and 2025-11-25 the
//! person is asked with a server→client `elicitation/create` request; under 2026-07-28
//! (stateless requests, `server/discover`) with an input-required result: the question
//! is kept server-side under an unguessable handle (`hcp_runtime::mcp::pending`), handed
//! to the client as `requestState`, and the client answers by retrying the call with it.
//!
//! Who calls: over stdio the server's `HCP_SESSION`, read once; over Streamable HTTP
//! ([`super::http`]) the session of each request's bearer token, which the HTTP layer
//! checked and put in the request's extensions ([`super::http::Bearer`]).

use super::intake::KNOWN_METHODS;
use hcp_model::Code;
use hcp_runtime::confirm::{self, Answered, ApprovalPrompt};
use hcp_runtime::mcp::pending::{Asked, INPUT_KEY, Question, Questions};
use hcp_runtime::mcp::{self as face, Catalog, ConfirmBy, Viewer};
use hcp_runtime::signature::Signature;
use hcp_runtime::{Answer, Call, CallArgs, Caller, Face, Runtime};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, CustomResult,
    ElicitRequestParams, ErrorCode, Implementation, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ResultType, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ElicitationMode, Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::PipeWriter;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How many verbs run at once; further calls wait their turn (a client cannot make the
/// server fork without bound). A call waiting for the person holds no slot.
pub const MAX_CONCURRENT_CALLS: usize = 8;

/// The MCP revisions `hcp mcp` serves, oldest first: 2025-06-18 and 2025-11-25 with the
/// `initialize` handshake, 2026-07-28 stateless (RUNTIME §10). A client asking
/// `initialize` for another (older, newer or unknown) is answered with 2025-11-25, the
/// newest with a handshake; a stateless request naming one hcp does not serve is refused
/// with the supported list (the SDK's negotiation).
pub const SUPPORTED: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// The client of a stdio server: there is one, the process at the other end of the pipes.
const STDIO_CLIENT: &str = "stdio";

/// Who makes one request: the caller the pipeline runs it as, the client a question's
/// answer is bound to, and what that principal is shown.
struct Who {
    caller: Arc<Caller>,
    client: String,
    viewer: Viewer,
}

impl Who {
    /// The principal's id for binding answers (`owner`, or `unknown` for a bad session).
    fn principal(&self) -> String {
        match &self.viewer {
            Viewer::Owner => "owner".into(),
            Viewer::Session(s) => s.principal.clone(),
            Viewer::Refused(_) => "unknown".into(),
        }
    }
}

/// Whether the request's client declared form elicitation (in `initialize`, or in the
/// request's own `_meta` under 2026-07-28); a client declaring neither form nor URL counts
/// as form, as MCP 2025-06-18 has it.
fn asks_person(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Whether the request speaks 2026-07-28 or later (input-required results, no
/// server→client requests).
fn stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What a call of the stateless revision answers: a result, or a question for the person.
enum Reply {
    Done(Box<Answer>),
    Ask(InputRequiredResult),
}

/// What the server shows: the catalog of the store's signature, who looks, and the names
/// it was last shown (a change is announced with `notifications/tools/list_changed`).
struct View {
    catalog: Catalog,
    viewer: Viewer,
    names: Vec<String>,
}

/// The server: the process facts read once at startup (`HCP_SESSION` among them), what
/// it shows, and the calls in flight.
#[derive(Clone)]
pub struct Server {
    rt: Arc<Runtime>,
    caller: Arc<Caller>,
    view: Arc<Mutex<View>>,
    inflight: Arc<Inflight>,
    slots: Arc<tokio::sync::Semaphore>,
    questions: Arc<Questions>,
    /// Over HTTP, each request's bearer token names its principal; over stdio the
    /// server's `HCP_SESSION`.
    http: bool,
}

fn warn_all(catalog: &Catalog) {
    for w in &catalog.warnings {
        tracing::warn!("{w}");
    }
}

impl Server {
    /// A server over `rt` for `caller`, its catalog built from the store as it is now.
    pub fn new(rt: Runtime, caller: Caller) -> Self {
        let signature = Signature::read(rt.home()).unwrap_or_default();
        let catalog = Catalog::build(rt.home(), signature, &Catalog::default());
        warn_all(&catalog);
        let viewer = Viewer::load(&rt, &caller, catalog.pack_ids(), jiff::Timestamp::now());
        let names = catalog.names(&viewer);
        Self {
            rt: Arc::new(rt),
            caller: Arc::new(caller),
            view: Arc::new(Mutex::new(View {
                catalog,
                viewer,
                names,
            })),
            inflight: Arc::new(Inflight::default()),
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_CALLS)),
            questions: Arc::new(Questions::default()),
            http: false,
        }
    }

    /// A server for Streamable HTTP over `rt`: each request is made as the session of its
    /// bearer token ([`super::http::Bearer`]), on the facts of `base` (the server process's
    /// directory and environment); `base`'s own `HCP_SESSION` and `HCP_PROJECT` are never
    /// used.
    pub fn for_http(rt: Runtime, mut base: Caller) -> Self {
        base.session_token = None;
        base.project = None;
        let mut s = Self::new(rt, base);
        s.http = true;
        s
    }

    /// Who makes the request of `context`.
    fn who(&self, context: &RequestContext<RoleServer>) -> Result<Who, McpError> {
        if !self.http {
            return Ok(Who {
                caller: self.caller.clone(),
                client: STDIO_CLIENT.into(),
                viewer: self.view().viewer.clone(),
            });
        }
        let bearer = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<super::http::Bearer>())
            .ok_or_else(|| {
                McpError::internal_error("the request carries no checked bearer token", None)
            })?;
        let mut caller = (*self.caller).clone();
        caller.session_token = Some(bearer.token.clone().into());
        let viewer = {
            let view = self.view();
            Viewer::load(
                &self.rt,
                &caller,
                view.catalog.pack_ids(),
                jiff::Timestamp::now(),
            )
        };
        Ok(Who {
            caller: Arc::new(caller),
            client: bearer.client.clone(),
            viewer,
        })
    }

    /// The runtime the calls run on.
    pub fn runtime(&self) -> Arc<Runtime> {
        self.rt.clone()
    }

    /// The calls in flight, for ending them all when the client goes away.
    pub fn inflight(&self) -> Arc<Inflight> {
        self.inflight.clone()
    }

    fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads the store's signature and who looks (the session, its grants); rebuilds
    /// the catalog when the owner changed the active packs, their install records or the
    /// runtime policy; answers true when the tools shown changed.
    pub fn refresh(&self) -> bool {
        let Ok(signature) = Signature::read(self.rt.home()) else {
            return false;
        };
        let mut view = self.view();
        let rebuilt = view.catalog.signature != signature;
        if rebuilt {
            view.catalog = Catalog::build(self.rt.home(), signature, &view.catalog);
            warn_all(&view.catalog);
        }
        if self.http {
            // Each request looks for its own principal (`Self::who`); nothing is announced.
            return false;
        }
        let now = jiff::Timestamp::now();
        view.viewer = Viewer::load(&self.rt, &self.caller, view.catalog.pack_ids(), now);
        let names = view.catalog.names(&view.viewer);
        let changed = rebuilt || names != view.names;
        view.names = names;
        changed
    }

    /// [`Self::refresh`], then `notifications/tools/list_changed` when something changed.
    pub async fn refresh_and_notify(&self, peer: &Peer<RoleServer>) {
        // A stateless (2026-07-28) client has no handshake, so no session to announce
        // changes on: it lists again.
        let stateless = peer.peer_info().is_none();
        if self.refresh()
            && !stateless
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::warn!("cannot send tools/list_changed: {e}");
        }
    }

    /// Runs one call in a slot, abandoned when the client cancels it or goes away.
    async fn run(
        &self,
        who: &Who,
        call: Call,
        answered: Option<Answered>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Answer, McpError> {
        let acquire = self.slots.clone().acquire_owned();
        let slot = tokio::select! {
            s = acquire => s.map_err(failed)?,
            () = context.ct.cancelled() => return Err(cancelled()),
        };
        let (reader, writer) = std::io::pipe().map_err(|e| {
            McpError::internal_error(format!("cannot make the cancel pipe: {e}"), None)
        })?;
        let Some(guard) = self.inflight.register(writer) else {
            // The client went away while the call waited for a slot: it never starts.
            return Err(cancelled());
        };
        let (rt, caller) = (self.rt.clone(), who.caller.clone());
        let task = tokio::task::spawn_blocking(move || {
            let cancel = Some(reader.as_fd());
            use hcp_runtime::pipeline::{Mode, Subject, run};
            let mode = match &answered {
                None => Mode::Exec(cancel),
                Some(a) => Mode::Answered(cancel, a),
            };
            let answer = run(&rt, &caller, Subject::Verb(call), mode);
            drop(slot);
            answer
        });
        let answer = tokio::select! {
            joined = task => joined.map_err(failed)?,
            () = context.ct.cancelled() => {
                // Closing the pipe ends the child's group; the engine audits the run.
                drop(guard);
                return Err(cancelled());
            }
        };
        drop(guard);
        Ok(answer)
    }

    /// Puts a question to the person through the client's elicitation (form mode), with
    /// no call slot held: true only for an accept of exactly what was asked. A decline, a
    /// cancel, other content, an answer after `timeout` or none: false.
    async fn ask(
        &self,
        params: Value,
        timeout: Duration,
        context: &RequestContext<RoleServer>,
    ) -> Result<bool, McpError> {
        let params: ElicitRequestParams = serde_json::from_value(params).map_err(failed)?;
        let answer = context
            .peer
            .create_elicitation_with_timeout(params, Some(timeout));
        tokio::select! {
            r = answer => Ok(r.ok().and_then(|r| serde_json::to_value(r).ok()).is_some_and(|v| confirm::accepted(&v))),
            () = context.ct.cancelled() => Err(cancelled()),
        }
    }

    /// The person in the loop (RUNTIME §10), for a client that declared form elicitation:
    /// a `confirm_required` refusal that carries the command is put to them, and only an
    /// accept runs that command, once; with `"mcp": {"approve_by_elicitation": true}`, a
    /// call the runtime policy paused for `confirmation` is put to them too, and an accept
    /// approves that pending approval, then the call runs once more.
    async fn with_the_person(
        &self,
        who: &Who,
        call: Call,
        mut answer: Answer,
        context: &RequestContext<RoleServer>,
    ) -> Result<Answer, McpError> {
        let modes = context.peer.supported_elicitation_modes();
        if !modes.contains(&ElicitationMode::Form) {
            return Ok(answer);
        }
        let config = face::config(&self.rt);
        let timeout = Duration::from_secs(config.elicitation_timeout_s);
        let mut answered = Answered::default();
        if let Some(p) = answer.preview.take() {
            if !self.ask(p.elicitation(), timeout, context).await? {
                confirm::not_accepted(&mut answer);
                return Ok(answer);
            }
            answered.command = Some(p.digest.clone());
            answer = self
                .run(who, call.clone(), Some(answered.clone()), context)
                .await?;
        }
        let tool = format!("{}.{}", call.pack_id.as_deref().unwrap_or(""), call.target);
        let Some(prompt) = self.approval_to_ask(who, &tool, &answer, &config) else {
            return Ok(answer);
        };
        if !self.ask(prompt.elicitation(), timeout, context).await? {
            return Ok(answer);
        }
        match confirm::approve(&self.rt, &prompt, jiff::Timestamp::now()) {
            Ok(a) => {
                answered.approval = Some(a.id);
                self.run(who, call, Some(answered), context).await
            }
            Err(r) => {
                tracing::warn!(
                    "the approval the person accepted is not granted: {}",
                    r.message
                );
                Ok(answer)
            }
        }
    }
}

impl Server {
    /// The pending approval `answer` was paused with, to put to the person: only with
    /// `mcp.approve_by_elicitation`, for a session's call the runtime policy paused for
    /// `confirmation`, while the approval is still pending and that call's.
    fn approval_to_ask(
        &self,
        who: &Who,
        tool: &str,
        answer: &Answer,
        config: &hcp_store::config::McpConfig,
    ) -> Option<ApprovalPrompt> {
        let paused = answer.result.code == Some(Code::RequiresConfirmation);
        let id = answer
            .result
            .extra
            .get("approval_id")
            .and_then(Value::as_str)?;
        let Viewer::Session(s) = &who.viewer else {
            return None;
        };
        if !(config.approve_by_elicitation && paused) {
            return None;
        }
        ApprovalPrompt::load(&self.rt, id, tool, &s.principal, jiff::Timestamp::now())
    }

    /// A retry whose question was not answered with an accept, or found no question: the
    /// call as if nobody had been asked (a confirm-gated one is `confirm required`, with
    /// the hint that the person did not accept), and no question again.
    async fn unanswered(
        &self,
        who: &Who,
        call: Call,
        context: &RequestContext<RoleServer>,
    ) -> Result<Answer, McpError> {
        let mut answer = self.run(who, call, None, context).await?;
        if answer.preview.take().is_some() {
            confirm::not_accepted(&mut answer);
        }
        Ok(answer)
    }

    /// A call under 2026-07-28 (RUNTIME §10): the person is asked with an input-required
    /// result, and answers by retrying. A retry carrying the handle (`requestState`) of a
    /// question hcp asked this client, for this principal and exactly this call, and in
    /// `inputResponses` an accept of exactly what was asked, runs the call with that
    /// answer; any other retry finds no question and is answered as if nobody had been
    /// asked (`confirm required`, or the approval left pending), and asks nothing again.
    async fn stateless_call(
        &self,
        who: &Who,
        call: Call,
        args: &[(String, hcp_model::ArgValue)],
        retry: Option<(String, Option<InputResponses>)>,
        asks: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<Reply, McpError> {
        let tool = format!("{}.{}", call.pack_id.as_deref().unwrap_or(""), call.target);
        let config = face::config(&self.rt);
        let now = jiff::Timestamp::now();
        let Some((handle, responses)) = retry else {
            let answer = self.run(who, call.clone(), None, context).await?;
            return self.question_for(who, &tool, args, answer, Answered::default(), asks, &config);
        };
        let question =
            self.questions
                .take(&handle, &who.client, &who.principal(), &tool, args, now);
        let accepted = responses
            .as_ref()
            .and_then(|r| r.get(INPUT_KEY))
            .is_some_and(confirm::accepted);
        let Some(q) = question else {
            return Ok(Reply::Done(Box::new(
                self.unanswered(who, call, context).await?,
            )));
        };
        let mut answered = q.answered.clone();
        match (&q.asked, accepted) {
            (Asked::Command(digest), true) => {
                answered.command = Some(digest.clone());
                let answer = self.run(who, call, Some(answered.clone()), context).await?;
                // An accepted command may still need the runtime policy's approval.
                self.question_for(who, &tool, args, answer, answered, asks, &config)
            }
            (Asked::Command(_), false) => Ok(Reply::Done(Box::new(
                self.unanswered(who, call, context).await?,
            ))),
            (Asked::Approval(prompt), true) => {
                match confirm::approve(&self.rt, prompt, jiff::Timestamp::now()) {
                    Ok(a) => answered.approval = Some(a.id),
                    Err(r) => tracing::warn!(
                        "the approval the person accepted is not granted: {}",
                        r.message
                    ),
                }
                let answer = self.run(who, call, Some(answered), context).await?;
                Ok(Reply::Done(Box::new(answer)))
            }
            (Asked::Approval(_), false) => {
                let answer = self.run(who, call, Some(answered), context).await?;
                Ok(Reply::Done(Box::new(answer)))
            }
        }
    }

    /// The question `answer` calls for, as an input-required result, when the client asks
    /// its person: the command a confirm-gated call would run (its preview), or, with
    /// `mcp.approve_by_elicitation`, the approval the runtime policy paused a session's
    /// call for. Otherwise the answer itself.
    #[allow(clippy::too_many_arguments)]
    fn question_for(
        &self,
        who: &Who,
        tool: &str,
        args: &[(String, hcp_model::ArgValue)],
        mut answer: Answer,
        answered: Answered,
        asks: bool,
        config: &hcp_store::config::McpConfig,
    ) -> Result<Reply, McpError> {
        let preview = answer.preview.take();
        if !asks {
            return Ok(Reply::Done(Box::new(answer)));
        }
        let expires = jiff::Timestamp::now()
            + jiff::SignedDuration::from_secs(config.elicitation_timeout_s as i64);
        let (asked, params) = if let Some(p) = preview {
            (Asked::Command(p.digest.clone()), p.elicitation())
        } else {
            let Some(prompt) = self.approval_to_ask(who, tool, &answer, config) else {
                return Ok(Reply::Done(Box::new(answer)));
            };
            let params = prompt.elicitation();
            (Asked::Approval(Box::new(prompt)), params)
        };
        let handle = match self.questions.ask(Question {
            client: who.client.clone(),
            principal: who.principal(),
            tool: tool.to_owned(),
            args: args.to_vec(),
            asked,
            answered,
            expires,
        }) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("cannot ask the person (no handle: {e}); the call stays refused");
                return Ok(Reply::Done(Box::new(answer)));
            }
        };
        let request: InputRequest =
            serde_json::from_value(json!({ "method": "elicitation/create", "params": params }))
                .map_err(failed)?;
        let mut requests = InputRequests::new();
        requests.insert(INPUT_KEY.to_owned(), request);
        Ok(Reply::Ask(InputRequiredResult::new(
            Some(requests),
            Some(handle),
        )))
    }
}

/// The cancel pipes of the calls in flight. Dropping a call's write end ends its child's
/// process group (the adapter polls the read end); the engine still writes the audit record.
/// Once [`Inflight::cancel_all`] ran, no call starts any more.
#[derive(Debug)]
pub struct Inflight {
    next: Mutex<u64>,
    /// `None` once the client is gone.
    writers: Mutex<Option<HashMap<u64, PipeWriter>>>,
}

impl Default for Inflight {
    fn default() -> Self {
        Self {
            next: Mutex::new(0),
            writers: Mutex::new(Some(HashMap::new())),
        }
    }
}

impl Inflight {
    /// Registers a call's write end; `None` when the client is already gone (the call must
    /// not start).
    fn register(self: &Arc<Self>, w: PipeWriter) -> Option<InflightGuard> {
        let id = {
            let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()?
            .insert(id, w);
        Some(InflightGuard {
            id,
            set: self.clone(),
        })
    }

    /// Abandons every call in flight and refuses new ones (the client closed its end).
    pub fn cancel_all(&self) {
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}

/// Removes (so closes) a call's write end when the call's future ends or is dropped.
struct InflightGuard {
    id: u64,
    set: Arc<Inflight>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if let Some(w) = self
            .set
            .writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            w.remove(&self.id);
        }
    }
}

fn failed(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("the call failed: {e}"), None)
}

fn cancelled() -> McpError {
    McpError::new(ErrorCode::INTERNAL_ERROR, "the call was cancelled", None)
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("hcp", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "each tool is a verb of an active hcp pack, named PACK.VERB, run through hcp's \
             gate (session, grants, arguments, confirm) and audited. a refusal is a result \
             with isError and its code; a write marked confirm runs once the person accepts \
             the exact command (elicitation), or with `confirm: true` among its arguments \
             for a client that cannot ask.",
        )
    }

    /// The MCP revisions `hcp mcp` serves: [`SUPPORTED`].
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(SUPPORTED)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.refresh_and_notify(&context.peer).await;
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.refresh_and_notify(&context.peer).await;
        let who = self.who(&context)?;
        let by = if asks_person(&context) {
            ConfirmBy::Person
        } else {
            ConfirmBy::Argument
        };
        let listed = self.view().catalog.listed(&who.viewer, by);
        let tools = listed
            .into_iter()
            .map(serde_json::from_value::<Tool>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(failed)?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.refresh_and_notify(&context.peer).await;
        let who = self.who(&context)?;
        // `_meta` (a tenant in it or not) is never read: the principal is the server's
        // (stdio) or the bearer token's (HTTP). A tool not shown to it is still called:
        // the gate refuses it with its code.
        let found = self.view().catalog.get(&request.name).cloned();
        let Some(entry) = found else {
            // The nearest tool shown, by the edit distance `hcp exec` suggests with.
            let near = {
                let view = self.view();
                hcp_runtime::target::suggest(&request.name, view.names.iter().map(String::as_str))
            };
            let mut message = format!("unknown tool `{}`", request.name);
            if let Some(n) = near.first() {
                message.push_str(&format!("; did you mean `{n}`?"));
            }
            return Err(McpError::invalid_params(
                message,
                Some(json!({ "code": Code::UnknownVerb })),
            ));
        };
        let asks = asks_person(&context);
        let reply = match face::arguments(request.arguments) {
            Ok(args) => {
                // A client that asks its person: the model's `confirm` does not count.
                let args = if asks {
                    confirm::for_the_person(args)
                } else {
                    args
                };
                let call = Call {
                    pack_id: Some(entry.pack_id.clone()),
                    target: entry.verb_key.clone(),
                    args: CallArgs::Named(args.clone()),
                    face: Face::Mcp,
                    timeout: None,
                };
                let policy = self.view().catalog.policy.clone();
                let refused = if self.http {
                    face::workdir_required(&self.rt, &entry, &who.viewer, &policy, &args)
                } else {
                    None
                };
                if let Some(a) = refused {
                    Reply::Done(Box::new(a))
                } else if stateless(&context) {
                    let retry = request.request_state.map(|h| (h, request.input_responses));
                    self.stateless_call(&who, call, &args, retry, asks, &context)
                        .await?
                } else {
                    let first = self.run(&who, call.clone(), None, &context).await?;
                    Reply::Done(Box::new(
                        self.with_the_person(&who, call, first, &context).await?,
                    ))
                }
            }
            Err(answer) => Reply::Done(answer),
        };
        let answer = match reply {
            Reply::Done(a) => a,
            Reply::Ask(question) => return Ok(question.into()),
        };
        let result = {
            let view = self.view();
            let schema = view.catalog.output_schema(&entry, &who.viewer);
            face::result(&answer, schema.as_ref())
        };
        let mut result: CallToolResult = serde_json::from_value(result).map_err(failed)?;
        // Required from 2026-07-28 on; the SDK clears it for older revisions.
        result.result_type = Some(ResultType::COMPLETE);
        Ok(result.into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        // A method the SDK knows reaches here only when its params did not parse.
        if KNOWN_METHODS.contains(&request.method.as_str()) {
            return Err(McpError::invalid_params(
                format!(
                    "invalid params of `{}`: they do not fit the method",
                    request.method
                ),
                None,
            ));
        }
        Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method `{}` is not served", request.method),
            None,
        ))
    }
}
