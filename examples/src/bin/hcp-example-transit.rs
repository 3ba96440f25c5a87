//! `hcp-example-transit`: the public-read CLI of the `transit` gold pack.
//!
//! A small built-in timetable of made-up places and three lines, observed at a fixed
//! simulated clock (07:40, or `--at HH:MM`), so every answer is deterministic. No network,
//! no files.
//!
//! ```text
//! transit find QUERY [--limit N] [--json]
//! transit plan FROM TO [--at HH:MM] [--limit N] [--json]
//! transit show OPTION_ID [--json]
//! transit status [--at HH:MM] [--json]
//! transit follow RUN_ID [--at HH:MM] [--json]
//! ```

use hcp_examples::{Failure, Opt, Outcome, out_json, out_line, parse_args, parse_count, run};
use serde_json::{Value, json};
use std::process::ExitCode;

const USAGE: &str = "usage: transit find QUERY [--limit N] [--json]
       transit plan FROM TO [--at HH:MM] [--limit N] [--json]
       transit show OPTION_ID [--json]
       transit status [--at HH:MM] [--json]
       transit follow RUN_ID [--at HH:MM] [--json]";

/// The simulated observation time, minutes after midnight (07:40).
const NOW: u32 = 7 * 60 + 40;

struct Place {
    id: &'static str,
    name: &'static str,
}

const PLACES: &[Place] = &[
    Place {
        id: "central",
        name: "Central Station",
    },
    Place {
        id: "northgate",
        name: "Northgate",
    },
    Place {
        id: "oldtown",
        name: "Old Town",
    },
    Place {
        id: "harbor",
        name: "Harbor",
    },
    Place {
        id: "airport",
        name: "Airport",
    },
    Place {
        id: "museum",
        name: "Museum Quarter",
    },
    Place {
        id: "elmpark",
        name: "Elm Park",
    },
    Place {
        id: "riverside",
        name: "Riverside",
    },
];

struct Line {
    id: &'static str,
    name: &'static str,
    /// Stops with their minutes after the run's departure from the first stop.
    stops: &'static [(&'static str, u32)],
    first: u32,
    headway: u32,
    runs: u32,
    /// Observed delay, minutes.
    delay: u32,
    /// The number of the line's first run (`run-N`).
    first_run: u32,
}

const LINES: &[Line] = &[
    Line {
        id: "red",
        name: "Red Line",
        stops: &[
            ("northgate", 0),
            ("central", 6),
            ("oldtown", 11),
            ("harbor", 18),
        ],
        first: 6 * 60,
        headway: 30,
        runs: 8,
        delay: 0,
        first_run: 1,
    },
    Line {
        id: "blue",
        name: "Blue Line",
        stops: &[
            ("airport", 0),
            ("central", 14),
            ("museum", 19),
            ("elmpark", 25),
            ("riverside", 31),
        ],
        first: 6 * 60 + 10,
        headway: 30,
        runs: 8,
        delay: 4,
        first_run: 9,
    },
    Line {
        id: "green",
        name: "Green Line",
        stops: &[("harbor", 0), ("museum", 9), ("riverside", 17)],
        first: 6 * 60 + 20,
        headway: 30,
        runs: 8,
        delay: 0,
        first_run: 17,
    },
];

fn main() -> ExitCode {
    run(USAGE, dispatch)
}

fn dispatch(args: Vec<String>) -> Outcome {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::usage("missing command"));
    };
    match cmd.as_str() {
        "find" => find(rest),
        "plan" => plan(rest),
        "show" => show(rest),
        "status" => status(rest),
        "follow" => follow(rest),
        "help" | "--help" => out_line(USAGE),
        other => Err(Failure::usage(format!("unknown command `{other}`"))),
    }
}

fn hhmm(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60 % 24, minutes % 60)
}

fn parse_hhmm(text: &str) -> Result<u32, Failure> {
    let bad = || Failure::usage(format!("time `{text}` is not HH:MM (00:00 to 23:59)"));
    let b = text.as_bytes();
    if b.len() != 5 || b[2] != b':' {
        return Err(bad());
    }
    let digit = |i: usize| -> Result<u32, Failure> {
        let c = b[i];
        if c.is_ascii_digit() {
            Ok(u32::from(c - b'0'))
        } else {
            Err(bad())
        }
    };
    let h = digit(0)? * 10 + digit(1)?;
    let m = digit(3)? * 10 + digit(4)?;
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

fn at_of(p: &hcp_examples::Parsed) -> Result<u32, Failure> {
    p.value("at").map_or(Ok(NOW), parse_hhmm)
}

fn limit_of(p: &hcp_examples::Parsed, default: usize) -> Result<usize, Failure> {
    match p.value("limit") {
        None => Ok(default),
        Some(t) => {
            let n = parse_count(t, "limit")?;
            if n == 0 {
                return Err(Failure::usage("limit must be at least 1"));
            }
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        }
    }
}

fn place(id: &str) -> Option<&'static Place> {
    PLACES.iter().find(|p| p.id == id)
}

fn place_json(p: &Place) -> Value {
    let lines: Vec<&str> = LINES
        .iter()
        .filter(|l| l.stops.iter().any(|(s, _)| *s == p.id))
        .map(|l| l.id)
        .collect();
    json!({ "id": p.id, "name": p.name, "lines": lines })
}

fn matches(p: &Place, query: &str) -> bool {
    let q = query.to_lowercase();
    p.id.contains(&q) || p.name.to_lowercase().contains(&q)
}

/// Resolves a place by exact id or name, else by a unique partial match.
fn resolve(text: &str) -> Result<&'static Place, Failure> {
    let q = text.trim();
    if q.is_empty() {
        return Err(Failure::usage("a place may not be empty"));
    }
    let lower = q.to_lowercase();
    if let Some(p) = PLACES
        .iter()
        .find(|p| p.id == lower || p.name.to_lowercase() == lower)
    {
        return Ok(p);
    }
    let hits: Vec<&Place> = PLACES.iter().filter(|p| matches(p, q)).collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(Failure::fail(format!(
            "no place matches `{q}` (try `transit find`)"
        ))),
        many => Err(Failure::fail(format!(
            "`{q}` is ambiguous: {}",
            many.iter().map(|p| p.id).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn find(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json"), Opt::value("limit")])?;
    let [query] = p.exactly(&["query"])? else {
        return Err(Failure::usage("missing argument <query>"));
    };
    let q = query.trim();
    if q.is_empty() {
        return Err(Failure::usage("the query may not be empty"));
    }
    let limit = limit_of(&p, PLACES.len())?;
    let hits: Vec<&Place> = PLACES
        .iter()
        .filter(|pl| matches(pl, q))
        .take(limit)
        .collect();
    if p.json() {
        let places: Vec<Value> = hits.iter().map(|pl| place_json(pl)).collect();
        return out_json(&json!({ "query": q, "places": places }));
    }
    if hits.is_empty() {
        return out_line(&format!("no place matches `{q}`"));
    }
    for pl in hits {
        let v = place_json(pl);
        let lines = v["lines"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        out_line(&format!("{:<10} {:<16} lines: {lines}", pl.id, pl.name))?;
    }
    Ok(())
}

/// A run of a line: its number and scheduled departure from the first stop.
#[derive(Clone, Copy)]
struct Run {
    number: u32,
    line: &'static Line,
    depart: u32,
}

fn runs() -> impl Iterator<Item = Run> {
    LINES.iter().flat_map(|line| {
        (0..line.runs).map(move |i| Run {
            number: line.first_run + i,
            line,
            depart: line.first + i * line.headway,
        })
    })
}

fn run_by_number(n: u32) -> Option<Run> {
    runs().find(|r| r.number == n)
}

fn stop_index(line: &Line, place: &str) -> Option<usize> {
    line.stops.iter().position(|(s, _)| *s == place)
}

/// One direct option: a run between two of its stops.
struct TripOption {
    run: Run,
    from: usize,
    to: usize,
}

impl TripOption {
    fn id(&self) -> String {
        format!(
            "opt-{}-{}-{}",
            self.run.number, self.run.line.stops[self.from].0, self.run.line.stops[self.to].0
        )
    }

    fn scheduled(&self, i: usize) -> u32 {
        self.run.depart + self.run.line.stops[i].1
    }

    fn json(&self, with_stops: bool) -> Value {
        let line = self.run.line;
        let depart = self.scheduled(self.from);
        let arrive = self.scheduled(self.to);
        let mut v = json!({
            "id": self.id(),
            "line": line.id,
            "run": format!("run-{}", self.run.number),
            "from": line.stops[self.from].0,
            "to": line.stops[self.to].0,
            "depart": hhmm(depart),
            "arrive": hhmm(arrive),
            "expected_arrive": hhmm(arrive + line.delay),
            "minutes": arrive - depart,
            "delay_min": line.delay,
        });
        if with_stops {
            let stops: Vec<Value> = (self.from..=self.to)
                .map(|i| {
                    let id = line.stops[i].0;
                    json!({
                        "place": id,
                        "name": place(id).map_or(id, |p| p.name),
                        "time": hhmm(self.scheduled(i)),
                    })
                })
                .collect();
            v["stops"] = Value::Array(stops);
        }
        v
    }

    fn text(&self) -> String {
        let line = self.run.line;
        let depart = self.scheduled(self.from);
        let arrive = self.scheduled(self.to);
        let delay = if line.delay > 0 {
            format!(", +{} min", line.delay)
        } else {
            String::new()
        };
        format!(
            "{}  {}  {} -> {}  ({} min{delay})",
            self.id(),
            line.name,
            hhmm(depart),
            hhmm(arrive),
            arrive - depart
        )
    }
}

fn plan(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[Opt::switch("json"), Opt::value("at"), Opt::value("limit")],
    )?;
    let [from, to] = p.exactly(&["from", "to"])? else {
        return Err(Failure::usage("missing argument <to>"));
    };
    let at = at_of(&p)?;
    let limit = limit_of(&p, 3)?;
    let from = resolve(from)?;
    let to = resolve(to)?;
    if from.id == to.id {
        return Err(Failure::fail(format!(
            "`{}` is both the start and the end",
            from.id
        )));
    }
    let mut options: Vec<TripOption> = runs()
        .filter_map(|run| {
            let f = stop_index(run.line, from.id)?;
            let t = stop_index(run.line, to.id)?;
            (f < t).then_some(TripOption {
                run,
                from: f,
                to: t,
            })
        })
        .filter(|o| o.scheduled(o.from) + o.run.line.delay >= at)
        .collect();
    options.sort_by_key(|o| (o.scheduled(o.to) + o.run.line.delay, o.run.number));
    options.truncate(limit);
    if p.json() {
        let list: Vec<Value> = options.iter().map(|o| o.json(false)).collect();
        return out_json(&json!({
            "from": place_json(from),
            "to": place_json(to),
            "at": hhmm(at),
            "options": list,
        }));
    }
    if options.is_empty() {
        return out_line(&format!(
            "no direct option from {} to {} after {}",
            from.name,
            to.name,
            hhmm(at)
        ));
    }
    out_line(&format!("{} -> {} after {}", from.name, to.name, hhmm(at)))?;
    for o in &options {
        out_line(&o.text())?;
    }
    Ok(())
}

fn parse_option_id(text: &str) -> Option<TripOption> {
    let rest = text.strip_prefix("opt-")?;
    let mut parts = rest.splitn(3, '-');
    let n = parts.next()?;
    let from = parts.next()?;
    let to = parts.next()?;
    let run = run_by_number(
        parse_count(n, "run")
            .ok()
            .and_then(|n| u32::try_from(n).ok())?,
    )?;
    let f = stop_index(run.line, from)?;
    let t = stop_index(run.line, to)?;
    (f < t).then_some(TripOption {
        run,
        from: f,
        to: t,
    })
}

fn show(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    let [id] = p.exactly(&["option_id"])? else {
        return Err(Failure::usage("missing argument <option_id>"));
    };
    let Some(o) = parse_option_id(id) else {
        return Err(Failure::fail(format!(
            "no option `{id}` (options come from `transit plan`)"
        )));
    };
    let v = o.json(true);
    if p.json() {
        return out_json(&v);
    }
    out_line(&o.text())?;
    for s in v["stops"].as_array().into_iter().flatten() {
        out_line(&format!(
            "  {}  {}",
            s["time"].as_str().unwrap_or_default(),
            s["name"].as_str().unwrap_or_default()
        ))?;
    }
    Ok(())
}

fn line_state(line: &Line) -> &'static str {
    if line.delay > 0 { "delayed" } else { "on_time" }
}

fn run_end(run: &Run) -> u32 {
    run.depart + run.line.stops.last().map_or(0, |(_, m)| *m) + run.line.delay
}

fn status(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json"), Opt::value("at")])?;
    p.exactly(&[])?;
    let at = at_of(&p)?;
    let lines: Vec<Value> = LINES
        .iter()
        .map(|line| {
            let active: Vec<String> = runs()
                .filter(|r| std::ptr::eq(r.line, line))
                .filter(|r| r.depart + line.delay <= at && run_end(r) > at)
                .map(|r| format!("run-{}", r.number))
                .collect();
            json!({
                "line": line.id,
                "name": line.name,
                "state": line_state(line),
                "delay_min": line.delay,
                "active_runs": active,
            })
        })
        .collect();
    if p.json() {
        return out_json(&json!({ "at": hhmm(at), "lines": lines }));
    }
    out_line(&format!("status at {}", hhmm(at)))?;
    for (line, v) in LINES.iter().zip(&lines) {
        let active = v["active_runs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        let state = if line.delay > 0 {
            format!("delayed {} min", line.delay)
        } else {
            "on time".to_owned()
        };
        let active = if active.is_empty() {
            "none".to_owned()
        } else {
            active
        };
        out_line(&format!("{:<10} {state:<16} running: {active}", line.name))?;
    }
    Ok(())
}

fn follow(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json"), Opt::value("at")])?;
    let [id] = p.exactly(&["run_id"])? else {
        return Err(Failure::usage("missing argument <run_id>"));
    };
    let at = at_of(&p)?;
    let run = id
        .strip_prefix("run-")
        .and_then(|n| parse_count(n, "run").ok())
        .and_then(|n| u32::try_from(n).ok())
        .and_then(run_by_number)
        .ok_or_else(|| Failure::fail(format!("no run `{id}` (runs are run-1 to run-24)")))?;
    let line = run.line;
    let stops: Vec<Value> = line
        .stops
        .iter()
        .map(|(sid, m)| {
            let scheduled = run.depart + m;
            let expected = scheduled + line.delay;
            json!({
                "place": sid,
                "name": place(sid).map_or(*sid, |p| p.name),
                "scheduled": hhmm(scheduled),
                "expected": hhmm(expected),
                "passed": expected <= at,
            })
        })
        .collect();
    let state = if run.depart + line.delay > at {
        "scheduled"
    } else if run_end(&run) <= at {
        "arrived"
    } else {
        "running"
    };
    let next = stops
        .iter()
        .find(|s| s["passed"] == json!(false))
        .map_or(Value::Null, |s| s["place"].clone());
    let v = json!({
        "run": format!("run-{}", run.number),
        "line": line.id,
        "at": hhmm(at),
        "state": state,
        "delay_min": line.delay,
        "next": next,
        "stops": stops,
    });
    if p.json() {
        return out_json(&v);
    }
    out_line(&format!(
        "run-{} on the {}: {state} at {}",
        run.number,
        line.name,
        hhmm(at)
    ))?;
    for s in &stops {
        let mark = if s["passed"] == json!(true) { "x" } else { " " };
        out_line(&format!(
            "  [{mark}] {}  {}",
            s["expected"].as_str().unwrap_or_default(),
            s["name"].as_str().unwrap_or_default()
        ))?;
    }
    Ok(())
}
