//! The byte relay of a tunnel or a forwarded request: both directions at once, each
//! counted as it goes (so a connection ended by the call's end is logged with what it
//! relayed), an end of stream passed on as a half-close.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bytes read per `read`: 16 KiB per direction per connection.
const CHUNK: usize = 16 * 1024;

/// Relays `child` ↔ `upstream` until both directions have ended, or one fails (then
/// both end). `sent` counts the bytes from the child, `received` those to it.
pub(crate) async fn both_ways(
    child: &mut TcpStream,
    upstream: &mut TcpStream,
    sent: &mut u64,
    received: &mut u64,
) {
    let (mut cr, mut cw) = child.split();
    let (mut ur, mut uw) = upstream.split();
    let _ = tokio::try_join!(
        pump(&mut cr, &mut uw, sent),
        pump(&mut ur, &mut cw, received)
    );
}

async fn pump<R, W>(r: &mut R, w: &mut W, n: &mut u64) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let k = r.read(&mut buf).await?;
        if k == 0 {
            return w.shutdown().await;
        }
        w.write_all(&buf[..k]).await?;
        *n += k as u64;
    }
}
