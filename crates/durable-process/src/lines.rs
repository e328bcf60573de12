//! An agent's output as lines of at most a bound.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder};

/// An agent's standard output as lines of at most `max` bytes. A longer
/// line is dropped as it comes (memory stays bounded by `max`, never grown
/// to the line), with a warn event, and reading goes on at the next line;
/// what a line holds (UTF-8, JSON) is the caller's to judge. Only the end
/// of the output, or an error reading it, ends the lines.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    codec: AnyDelimiterCodec,
    buf: BytesMut,
    eof: bool,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Reads lines of at most `max` bytes from `reader`.
    pub fn new(reader: R, max: usize) -> Self {
        let codec = AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max);
        LineReader { reader, codec, buf: BytesMut::with_capacity(8 * 1024), eof: false, max }
    }

    /// The next line, without its `\n` (and a `\r` before it); `None` at
    /// the end (the last line may lack its `\n`).
    pub async fn next_line(&mut self) -> std::io::Result<Option<Bytes>> {
        loop {
            let decoded = if self.eof {
                self.codec.decode_eof(&mut self.buf)
            } else {
                self.codec.decode(&mut self.buf)
            };
            match decoded {
                Ok(Some(line)) => return Ok(Some(strip_cr(line))),
                Ok(None) if self.eof => return Ok(None),
                Ok(None) => {
                    if self.reader.read_buf(&mut self.buf).await? == 0 {
                        self.eof = true;
                    }
                }
                Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => {
                    // The codec drops the rest of that line itself.
                    tracing::warn!(max = self.max, "a line of the agent's output is over its limit; dropped");
                }
                Err(AnyDelimiterCodecError::Io(e)) => return Err(e),
            }
        }
    }
}

fn strip_cr(line: Bytes) -> Bytes {
    match line.last() {
        Some(b'\r') => line.slice(..line.len() - 1),
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut lines = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(l) = lines.next_line().await.unwrap() {
            out.push(l.to_vec());
        }
        out
    }

    #[tokio::test]
    async fn lines_over_the_bound_are_dropped_and_the_rest_come_through_as_they_are() {
        let mut input = b"{\"a\":1}\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\n\xff\xfe not utf-8\n{\"b\":2}\n{\"c\":3}");
        let got = all(&input, 64).await;
        let want: Vec<Vec<u8>> = vec![
            b"{\"a\":1}".to_vec(),
            b"\xff\xfe not utf-8".to_vec(),
            b"{\"b\":2}".to_vec(),
            b"{\"c\":3}".to_vec(),
        ];
        assert_eq!(got, want, "the 100-byte line is dropped; the last comes without its newline");
    }

    #[tokio::test]
    async fn a_line_far_over_the_bound_keeps_the_buffer_bounded() {
        // 8 MiB with no newline, then a short line: the buffer never holds the long one.
        let mut input = vec![b'y'; 8 * 1024 * 1024];
        input.extend(b"\n{\"ok\":true}\n");
        let mut lines = LineReader::new(&input[..], 1024);
        let line = lines.next_line().await.unwrap().expect("the line after the long one");
        assert_eq!(&line[..], b"{\"ok\":true}");
        assert!(lines.buf.capacity() < 1024 * 1024, "buffer grew to {}", lines.buf.capacity());
        assert!(lines.next_line().await.unwrap().is_none());
    }

    /// A reader that fails after its first line.
    struct Failing(Option<&'static [u8]>);

    impl AsyncRead for Failing {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(match self.0.take() {
                Some(bytes) => {
                    buf.put_slice(bytes);
                    Ok(())
                }
                None => Err(std::io::Error::other("broken pipe of the test")),
            })
        }
    }

    #[tokio::test]
    async fn a_read_error_is_returned_after_the_lines_before_it() {
        let mut lines = LineReader::new(Failing(Some(b"one\ntw")), 64);
        assert_eq!(&lines.next_line().await.unwrap().unwrap()[..], b"one");
        let err = lines.next_line().await.unwrap_err();
        assert_eq!(err.to_string(), "broken pipe of the test");
    }
}
