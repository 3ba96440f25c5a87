//! The MCP server of `hcp mcp`: `tools/list` from the [`Catalog`], `tools/call` through
//! the runtime's pipeline (`hcp_runtime::pipeline::exec`) with [`Face::Mcp`], the same path
//! as `hcp exec --envelope`.
//!
//! Errors are split as the MCP specification splits them: an unknown tool or a malformed
//! request is a JSON-RPC error; everything the gate or the verb answers (a refusal with its
//! code, a failed run) is a tool result with `isError: true`.

use super::catalog::{Catalog, Signature};
use super::intake::KNOWN_METHODS;
use hcp_model::{ArgValue, Code};
use hcp_runtime::record::early_refusal;
use hcp_runtime::{Answer, Call, CallArgs, Caller, Face, Refusal, Runtime};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, JsonObject, ListToolsResult, MetaObject,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::PipeWriter;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};

/// The longest value one argument may hold, in bytes: Linux's limit for one argv element
/// (`MAX_ARG_STRLEN`, 128 KiB with its NUL).
pub const MAX_VALUE_BYTES: usize = 128 * 1024 - 1;

/// How many verbs run at once; further calls wait their turn (a client cannot make the
/// server fork without bound).
pub const MAX_CONCURRENT_CALLS: usize = 8;

/// The server: the process facts read once at startup (`HCP_SESSION` among them), the
/// catalog, and the calls in flight.
#[derive(Clone)]
pub struct Server {
    rt: Arc<Runtime>,
    caller: Arc<Caller>,
    catalog: Arc<Mutex<Catalog>>,
    inflight: Arc<Inflight>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl Server {
    /// A server over `rt` for `caller`, its catalog built from the store as it is now.
    pub fn new(rt: Runtime, caller: Caller) -> Self {
        let signature = Signature::read(rt.home()).unwrap_or_default();
        let catalog = Catalog::build(
            rt.home(),
            signature,
            &Catalog::default(),
            caller.session_token.is_none(),
        );
        Self {
            rt: Arc::new(rt),
            caller: Arc::new(caller),
            catalog: Arc::new(Mutex::new(catalog)),
            inflight: Arc::new(Inflight::default()),
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_CALLS)),
        }
    }

    /// The calls in flight, for ending them all when the client goes away.
    pub fn inflight(&self) -> Arc<Inflight> {
        self.inflight.clone()
    }

    fn catalog(&self) -> MutexGuard<'_, Catalog> {
        self.catalog.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads the signature; when the owner changed the active packs or their install
    /// records, rebuilds the catalog and answers true.
    pub fn refresh(&self) -> bool {
        let Ok(signature) = Signature::read(self.rt.home()) else {
            return false;
        };
        let mut cat = self.catalog();
        if cat.signature == signature {
            return false;
        }
        let next = Catalog::build(
            self.rt.home(),
            signature,
            &cat,
            self.caller.session_token.is_none(),
        );
        *cat = next;
        true
    }

    /// [`Self::refresh`], then `notifications/tools/list_changed` when something changed.
    pub async fn refresh_and_notify(&self, peer: &Peer<RoleServer>) {
        if self.refresh()
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::warn!("cannot send tools/list_changed: {e}");
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

/// The call's arguments as the envelope face takes them: a JSON object of strings,
/// numbers and booleans, each string at most [`MAX_VALUE_BYTES`].
///
/// # Errors
/// The refusal answer (not audited, like a bad envelope): `bad_envelope` for a value of
/// another type, `arg_invalid` for a value too long for argv.
pub fn arguments(args: Option<JsonObject>) -> Result<Vec<(String, ArgValue)>, Box<Answer>> {
    let mut out = Vec::new();
    for (name, v) in args.unwrap_or_default() {
        let value = match v {
            Value::String(s) => {
                if s.len() > MAX_VALUE_BYTES {
                    return Err(Box::new(early_refusal(Refusal::new(
                        Code::ArgInvalid,
                        format!(
                            "argument `{name}` is {} bytes; a value may be at most {MAX_VALUE_BYTES} bytes (one argv element)",
                            s.len()
                        ),
                    ))));
                }
                ArgValue::String(s)
            }
            Value::Number(n) => ArgValue::Number(n),
            Value::Bool(b) => ArgValue::Bool(b),
            other => {
                let kind = match other {
                    Value::Null => "null",
                    Value::Array(_) => "an array",
                    _ => "an object",
                };
                return Err(Box::new(early_refusal(
                    Refusal::new(
                        Code::BadEnvelope,
                        format!(
                            "argument `{name}` is {kind}; a value is a string, a number or a boolean"
                        ),
                    )
                    .hint("the tool's inputSchema lists its arguments"),
                )));
            }
        };
        out.push((name, value));
    }
    Ok(out)
}

/// The tool result of an answer. A refusal: `isError`, the message as text (exactly
/// `confirm required` for the confirm gate), the code and hint as a second text, and the
/// refusal object of RUNTIME §5 as `structuredContent`. A run: the child's stdout as text
/// (stderr as a second text when not empty), its JSON object as `structuredContent` when
/// it printed one, `isError` unless it exited 0; the run's facts (exit code, audit id…) in
/// `_meta.hcp`.
pub fn tool_result(a: &Answer) -> CallToolResult {
    let r = &a.result;
    let mut facts = serde_json::to_value(r).unwrap_or(Value::Null);
    if r.exit_code.is_none() {
        let message = r.error.clone().unwrap_or_else(|| "refused".into());
        let mut detail = format!("code: {}", r.code.map_or("refused", Code::as_str));
        if let Some(h) = &r.hint {
            detail.push_str(&format!("\nhint: {h}"));
        }
        let mut res = CallToolResult::error(vec![
            ContentBlock::text(message),
            ContentBlock::text(detail),
        ]);
        res.structured_content = Some(facts);
        return res;
    }
    let mut content = vec![ContentBlock::text(String::from_utf8_lossy(&a.stdout))];
    if !a.stderr.is_empty() {
        content.push(ContentBlock::text(String::from_utf8_lossy(&a.stderr)));
    }
    let mut res = if r.ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    if r.data.is_object() {
        res.structured_content = Some(r.data.clone());
    }
    if let Value::Object(m) = &mut facts {
        for k in ["stdout", "stderr", "data"] {
            m.remove(k);
        }
    }
    let mut meta = JsonObject::new();
    meta.insert("hcp".into(), facts);
    res.meta = Some(MetaObject(meta));
    res
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
             with isError and its code; a write marked confirm runs only with `confirm: true` among \
             its arguments.",
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
        let tools = self.catalog().tools().map(|e| e.tool.clone()).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.refresh_and_notify(&context.peer).await;
        // `_meta` (a tenant in it or not) is never read: the principal is the server's.
        let Some((pack_id, verb_key)) = self
            .catalog()
            .get(&request.name)
            .map(|e| (e.pack_id.clone(), e.verb_key.clone()))
        else {
            return Err(McpError::invalid_params(
                format!("unknown tool `{}`", request.name),
                Some(json!({ "code": Code::UnknownVerb })),
            ));
        };
        let args = match arguments(request.arguments) {
            Ok(a) => a,
            Err(answer) => return Ok(tool_result(&answer).into()),
        };
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
        let call = Call {
            pack_id: Some(pack_id),
            target: verb_key,
            args: CallArgs::Named(args),
            face: Face::Mcp,
            timeout: None,
        };
        let (rt, caller) = (self.rt.clone(), self.caller.clone());
        let task = tokio::task::spawn_blocking(move || {
            let answer = hcp_runtime::pipeline::exec(&rt, &caller, call, Some(reader.as_fd()));
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
        Ok(tool_result(&answer).into())
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
