//! Reading every machine's chain from a position, each record verified (`hcp audit
//! export`, RUNTIME §11): plain reads in one transaction, no lock on a chain's head.

use crate::PgState;
use crate::audit::chain_hash;
use crate::error::PgResult;
use hcp_store::audit::{ChainPos, Fault, ReadBatch, ReadFault, ReadRecord};
use postgres::types::Type;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

impl PgState {
    /// At most `max` records after `from` (a position per machine; a machine it does not
    /// name is read from its first record), oldest first within each chain, each checked
    /// against its chain hash and the record before it; a record that does not verify
    /// ends its chain's part of the batch as the batch's fault (the first such, by
    /// machine).
    ///
    /// # Errors
    /// [`crate::PgError`].
    pub fn audit_read(&self, from: &[ChainPos], max: usize) -> PgResult<ReadBatch> {
        let known: BTreeMap<String, ChainPos> = from
            .iter()
            .filter_map(|p| p.machine.clone().map(|m| (m, p.clone())))
            .collect();
        let machines: Vec<&str> = known.keys().map(String::as_str).collect();
        let seqs: Vec<i64> = known
            .values()
            .map(|p| i64::try_from(p.seq).unwrap_or(i64::MAX))
            .collect();
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = self.with(|c| {
            c.query_typed(
                "WITH cur (machine, seq) AS (SELECT * FROM unnest($1::text[], $2::bigint[]))
                 SELECT r.machine, r.seq, r.prev, r.hash, r.body
                 FROM @.audit_chain ch
                 LEFT JOIN cur ON cur.machine = ch.machine
                 CROSS JOIN LATERAL (
                     SELECT x.machine, x.seq, x.prev, x.hash, x.body FROM @.audit_record x
                     WHERE x.machine = ch.machine AND x.seq > coalesce(cur.seq, 0)
                     ORDER BY x.seq LIMIT $3) r
                 WHERE ch.seq > coalesce(cur.seq, 0)
                 ORDER BY r.machine, r.seq",
                &[
                    (&machines, Type::TEXT_ARRAY),
                    (&seqs, Type::INT8_ARRAY),
                    (&limit, Type::INT8),
                ],
            )?
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<_, String>(0)?,
                    r.try_get::<_, i64>(1)?,
                    r.try_get::<_, String>(2)?,
                    r.try_get::<_, String>(3)?,
                    r.try_get::<_, String>(4)?,
                ))
            })
            .collect::<PgResult<Vec<_>>>()
        })?;
        let mut batch = ReadBatch::default();
        let mut stopped: Vec<String> = Vec::new();
        let mut pos: BTreeMap<String, ChainPos> = known;
        for (machine, seq, prev, hash, body) in rows {
            if stopped.contains(&machine) || batch.records.len() >= max {
                continue;
            }
            let at = pos
                .entry(machine.clone())
                .or_insert_with(|| ChainPos::start(Some(machine.clone())))
                .clone();
            let seq = u64::try_from(seq).unwrap_or(0);
            let mut fields = match serde_json::from_str::<Value>(&body) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let named = fields.get("machine").and_then(Value::as_str) == Some(machine.as_str());
            fields.insert("machine".into(), Value::String(machine.clone()));
            fields.insert("seq".into(), Value::from(seq));
            fields.insert("prev".into(), Value::String(prev.clone()));
            fields.insert("hash".into(), Value::String(hash));
            let checked = if named {
                at.next(&fields, &chain_hash(&prev, seq, &body), 0)
            } else {
                Err(ReadFault {
                    machine: Some(machine.clone()),
                    seq: at.seq + 1,
                    id: fields.get("id").and_then(Value::as_str).map(str::to_owned),
                    fault: Fault::MachineMismatch,
                    detail: "its body does not name the machine whose chain holds it".into(),
                })
            };
            match checked {
                Ok(after) => {
                    pos.insert(machine, after.clone());
                    batch.records.push(ReadRecord { fields, after });
                }
                Err(f) => {
                    stopped.push(machine);
                    if batch.fault.is_none() {
                        batch.fault = Some(f);
                    }
                }
            }
        }
        Ok(batch)
    }
}
