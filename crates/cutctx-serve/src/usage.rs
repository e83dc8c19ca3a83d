//! The provider's own count of a call's prompt, read from its response as it streams past
//! (an SSE stream or one JSON body), without changing a byte of it. Where each format puts its
//! usage and what its fields mean is the format's descriptor's ([`Descriptor::usage`]): this
//! file only finds the bodies and events to ask it of.

use cutctx_ops::Format;
use cutctx_ops::provider::{Descriptor, ReportedUsage};
use serde_json::Value;

/// The most of a response (or of one SSE line) kept to be read; past it the usage is not read.
const MOST: usize = 8 * 1024 * 1024;

/// `bytes` unpacked from gzip, at most [`MOST`] of them; `None` when they are not gzip or
/// unpack to more.
fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::new();
    let limit = u64::try_from(MOST).ok()? + 1;
    flate2::read::GzDecoder::new(bytes)
        .take(limit)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() <= MOST).then_some(out)
}

/// What the provider counted of a call's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Usage {
    /// The whole prompt, cached or not.
    pub(crate) prompt: u64,
    /// The part of it read from the provider's cache.
    pub(crate) cached: u64,
}

/// Reads the usage out of a response's bytes as they pass.
#[derive(Debug)]
pub(crate) struct Tap {
    descriptor: &'static Descriptor,
    sse: bool,
    gzip: bool,
    buf: Vec<u8>,
    overflow: bool,
    /// The counts read so far: Anthropic spreads them over two events.
    fields: ReportedUsage,
}

impl Tap {
    /// A tap for a response in `format`; `sse` when its content type is `text/event-stream`,
    /// `gzip` when its content encoding is gzip (a streamed one is then not read).
    pub(crate) const fn new(format: Format, sse: bool, gzip: bool) -> Self {
        Self {
            descriptor: format.descriptor(),
            sse,
            gzip,
            buf: Vec::new(),
            overflow: false,
            fields: ReportedUsage {
                prompt_tokens: None,
                cached_tokens: None,
                cache_creation_tokens: None,
            },
        }
    }

    /// Takes the next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if self.sse && self.gzip {
            return;
        }
        if !self.sse {
            if self.buf.len() + chunk.len() > MOST {
                self.overflow = true;
                self.buf = Vec::new();
            } else if !self.overflow {
                self.buf.extend_from_slice(chunk);
            }
            return;
        }
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            let (line, after) = rest.split_at(i);
            if !self.overflow {
                self.buf.extend_from_slice(line);
                let line = std::mem::take(&mut self.buf);
                self.line(&line);
            }
            self.overflow = false;
            self.buf.clear();
            rest = after.get(1..).unwrap_or(&[]);
        }
        if self.buf.len() + rest.len() > MOST {
            self.overflow = true;
            self.buf = Vec::new();
        } else if !self.overflow {
            self.buf.extend_from_slice(rest);
        }
    }

    /// The usage of a response cut short (the client left, the upstream failed): what the
    /// stream's complete events reported, since the provider reported it to the client too,
    /// and billed it. A cut body that is not a stream is not JSON, so it reports none.
    pub(crate) fn seen(self) -> Option<Usage> {
        if !self.sse {
            return None;
        }
        self.usage()
    }

    /// The usage read, once the body has ended; `None` when the response carried none.
    pub(crate) fn finish(mut self) -> Option<Usage> {
        if self.sse {
            if !self.overflow && !self.buf.is_empty() {
                let line = std::mem::take(&mut self.buf);
                self.line(&line);
            }
        } else if !self.overflow {
            let body = if self.gzip {
                gunzip(&self.buf)
            } else {
                Some(std::mem::take(&mut self.buf))
            };
            if let Some(v) = body.and_then(|b| serde_json::from_slice::<Value>(&b).ok()) {
                self.event(&v);
            }
        }
        self.usage()
    }

    /// The usage the fields read so far add up to; `None` when the prompt's count is missing.
    fn usage(&self) -> Option<Usage> {
        let (prompt, cached) = self.descriptor.usage.prompt_and_cached(&self.fields)?;
        Some(Usage { prompt, cached })
    }

    /// One SSE line: a `data:` line's JSON is an event.
    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        if let Ok(v) = serde_json::from_slice::<Value>(data) {
            self.event(&v);
        }
    }

    /// One JSON object (a whole body or an event): its usage, wherever the format puts it.
    fn event(&mut self, v: &Value) {
        let fields = &self.descriptor.usage;
        let Some(usage) = fields.find(v) else {
            return;
        };
        let read = fields.read(usage);
        let f = &mut self.fields;
        f.prompt_tokens = read.prompt_tokens.or(f.prompt_tokens);
        f.cached_tokens = read.cached_tokens.or(f.cached_tokens);
        f.cache_creation_tokens = read.cache_creation_tokens.or(f.cache_creation_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap(format: Format, sse: bool, chunks: &[&str]) -> Option<Usage> {
        let mut t = Tap::new(format, sse, false);
        for c in chunks {
            t.feed(c.as_bytes());
        }
        t.finish()
    }

    #[test]
    fn a_cut_stream_reports_the_usage_of_its_complete_events_only() {
        let done = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\ndata: [DONE]\n\n";
        let mut t = Tap::new(Format::OpenAiChat, true, false);
        t.feed(done.as_bytes());
        assert_eq!(
            t.seen(),
            Some(Usage {
                prompt: 50,
                cached: 32
            })
        );
        // A usage event cut in the middle of its line was never whole: none.
        let mut t = Tap::new(Format::OpenAiChat, true, false);
        t.feed(&done.as_bytes()[..40]);
        assert_eq!(t.seen(), None);
        // Anthropic's prompt count comes in message_start: a stream cut before message_delta
        // still reports it.
        let mut t = Tap::new(Format::Anthropic, true, false);
        t.feed(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90}}}\n\n");
        assert_eq!(
            t.seen(),
            Some(Usage {
                prompt: 100,
                cached: 90
            })
        );
        // A whole JSON body cut short is not JSON: none, where finish would read a whole one.
        let body = br#"{"usage":{"prompt_tokens":7}}"#;
        let mut t = Tap::new(Format::OpenAiChat, false, false);
        t.feed(body);
        assert_eq!(t.seen(), None);
        let mut t = Tap::new(Format::OpenAiChat, false, false);
        t.feed(body);
        assert_eq!(
            t.finish(),
            Some(Usage {
                prompt: 7,
                cached: 0
            })
        );
    }

    #[test]
    fn anthropic_streams_split_anywhere() {
        let text = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,\"cache_creation_input_tokens\":5}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\n\n";
        for cut in [1, 7, 40, 100, text.len() - 1] {
            let (a, b) = text.split_at(cut);
            assert_eq!(
                tap(Format::Anthropic, true, &[a, b]),
                Some(Usage {
                    prompt: 105,
                    cached: 90
                })
            );
        }
        let body = r#"{"usage":{"input_tokens":4,"output_tokens":1}}"#;
        assert_eq!(
            tap(Format::Anthropic, false, &[body]),
            Some(Usage {
                prompt: 4,
                cached: 0
            })
        );
    }

    #[test]
    fn openai_chat_and_responses() {
        let chunks = "data: {\"choices\":[],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\ndata: [DONE]\n\n";
        assert_eq!(
            tap(Format::OpenAiChat, true, &[chunks]),
            Some(Usage {
                prompt: 50,
                cached: 32
            })
        );
        let events = "event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":20,\"input_tokens_details\":{\"cached_tokens\":8}}}}\r\n\r\n";
        assert_eq!(
            tap(Format::OpenAiResponses, true, &[events]),
            Some(Usage {
                prompt: 20,
                cached: 8
            })
        );
        assert_eq!(tap(Format::OpenAiChat, false, &["not json"]), None);
        // A gzip body, as an SDK asking for one gets it.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, br#"{"usage":{"prompt_tokens":70}}"#).expect("gzip");
        let packed = gz.finish().expect("gzip");
        let mut t = Tap::new(Format::OpenAiChat, false, true);
        t.feed(&packed);
        assert_eq!(
            t.finish(),
            Some(Usage {
                prompt: 70,
                cached: 0
            })
        );
    }
}
