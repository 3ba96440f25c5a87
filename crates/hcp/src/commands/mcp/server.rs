//! The MCP server of `hcp mcp`: `tools/list` from the runtime's catalog, filtered for the
//! server's principal (`hcp_runtime::mcp`), `tools/call` through the runtime's pipeline
//! with [`Face::Mcp`], the same path as `hcp exec --envelope`, and the person asked
//! through the client's elicitation where the call needs them (`hcp_runtime::confirm`).
//!
//! Errors are split as the MCP specification splits them: an unknown tool or a malformed
//! request is a JSON-RPC error; everything the gate or the verb answers (a refusal with its
//! code, a failed run) is a tool result with `isError: true`.

use super::intake::KNOWN_METHODS;
use hcp_model::Code;
use hcp_runtime::confirm::{self, Answered, ApprovalPrompt};
use hcp_runtime::mcp::{self as face, Catalog, ConfirmBy, Viewer};
use hcp_runtime::signature::Signature;
use hcp_runtime::{Answer, Call, CallArgs, Caller, Face, Runtime};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, CustomResult,
    ElicitRequestParams, ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
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
        }
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
        let now = jiff::Timestamp::now();
        view.viewer = Viewer::load(&self.rt, &self.caller, view.catalog.pack_ids(), now);
        let names = view.catalog.names(&view.viewer);
        let changed = rebuilt || names != view.names;
        view.names = names;
        changed
    }

    /// [`Self::refresh`], then `notifications/tools/list_changed` when something changed.
    pub async fn refresh_and_notify(&self, peer: &Peer<RoleServer>) {
        if self.refresh()
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::warn!("cannot send tools/list_changed: {e}");
        }
    }

    /// Runs one call in a slot, abandoned when the client cancels it or goes away.
    async fn run(
        &self,
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
        let (rt, caller) = (self.rt.clone(), self.caller.clone());
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
                .run(call.clone(), Some(answered.clone()), context)
                .await?;
        }
        let paused = answer.result.code == Some(Code::RequiresConfirmation);
        let id = answer
            .result
            .extra
            .get("approval_id")
            .and_then(Value::as_str);
        let principal = match &self.view().viewer {
            Viewer::Session(s) => Some(s.principal.clone()),
            _ => None,
        };
        let (true, true, Some(id), Some(principal)) =
            (config.approve_by_elicitation, paused, id, principal)
        else {
            return Ok(answer);
        };
        let tool = format!("{}.{}", call.pack_id.as_deref().unwrap_or(""), call.target);
        let now = jiff::Timestamp::now();
        let Some(prompt) = ApprovalPrompt::load(&self.rt, id, &tool, &principal, now) else {
            return Ok(answer);
        };
        if !self.ask(prompt.elicitation(), timeout, context).await? {
            return Ok(answer);
        }
        match confirm::approve(&self.rt, &prompt, jiff::Timestamp::now()) {
            Ok(a) => {
                answered.approval = Some(a.id);
                self.run(call, Some(answered), context).await
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

    /// The MCP revisions `hcp mcp` follows: those rmcp 3.11 serves with the `initialize`
    /// handshake, up to 2025-11-25. 2026-07-28 (stateless, no handshake) is not offered, so
    /// a client asking for it at `initialize` is answered with 2025-11-25 and one that skips
    /// the handshake is told which versions are supported.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
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
        let by = if context
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            ConfirmBy::Person
        } else {
            ConfirmBy::Argument
        };
        let listed = {
            let view = self.view();
            view.catalog.listed(&view.viewer, by)
        };
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
        // `_meta` (a tenant in it or not) is never read: the principal is the server's. A
        // tool not shown to it is still called: the gate refuses it with its code.
        let Some((pack_id, verb_key)) = self
            .view()
            .catalog
            .get(&request.name)
            .map(|e| (e.pack_id.clone(), e.verb_key.clone()))
        else {
            return Err(McpError::invalid_params(
                format!("unknown tool `{}`", request.name),
                Some(json!({ "code": Code::UnknownVerb })),
            ));
        };
        let asks = context
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form);
        let answer = match face::arguments(request.arguments) {
            Ok(args) => {
                // A client that asks its person: the model's `confirm` does not count.
                let args = if asks {
                    confirm::for_the_person(args)
                } else {
                    args
                };
                let call = Call {
                    pack_id: Some(pack_id),
                    target: verb_key,
                    args: CallArgs::Named(args),
                    face: Face::Mcp,
                    timeout: None,
                };
                let first = self.run(call.clone(), None, &context).await?;
                self.with_the_person(call, first, &context).await?
            }
            Err(answer) => *answer,
        };
        let result = {
            let view = self.view();
            let schema = view
                .catalog
                .get(&request.name)
                .and_then(|e| view.catalog.output_schema(e, &view.viewer));
            face::result(&answer, schema.as_ref())
        };
        let result: CallToolResult = serde_json::from_value(result).map_err(failed)?;
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
