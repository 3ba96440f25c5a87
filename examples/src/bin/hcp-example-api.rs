//! `hcp-example-api [--port N] [--until-stdin-closes]`: serves the example task API
//! (`hcp_examples::api`) on `127.0.0.1:N` (default 0: any free port) and prints
//! `http://127.0.0.1:PORT` on stdout once it listens, then serves until it is killed
//! (`SIGTERM`, `SIGINT`: Ctrl-C), whatever its stdin is — so `hcp-example-api &` from a
//! script, whose stdin is closed or `/dev/null`, keeps serving. With
//! `--until-stdin-closes` it also stops, exit 0, when its stdin closes (a parent that
//! holds the pipe stops it by closing it).

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    hcp_examples::run(
        "usage: hcp-example-api [--port N] [--until-stdin-closes]",
        |args| -> hcp_examples::Outcome {
            let parsed = hcp_examples::parse_args(
                &args,
                &[
                    hcp_examples::Opt::value("port"),
                    hcp_examples::Opt::switch("until-stdin-closes"),
                ],
            )?;
            if !parsed.positionals.is_empty() {
                return Err(hcp_examples::Failure::usage("no positional arguments"));
            }
            let port = match parsed.value("port") {
                Some(p) => u16::try_from(hcp_examples::parse_count(p, "port")?)
                    .map_err(|_| hcp_examples::Failure::usage("`port` is not a port"))?,
                None => 0,
            };
            let server =
                hcp_examples::api::ApiServer::start(port).map_err(hcp_examples::Failure::fail)?;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{}", server.origin());
            let _ = out.flush();
            if parsed.has("until-stdin-closes") {
                let mut sink = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut sink);
                drop(server);
                return Ok(());
            }
            // The server's threads serve; this one waits to be killed.
            loop {
                std::thread::park();
            }
        },
    )
}
