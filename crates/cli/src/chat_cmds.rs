//! The chat's slash commands: parsing, help, and the `/stats` text.

use std::path::PathBuf;

use minfer_engine::ChatStats;

/// A slash command typed at the chat prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `/help`
    Help,
    /// `/clear`: forget the conversation, keep the system prompt.
    Clear,
    /// `/regen`: sample the last answer again.
    Regen,
    /// `/undo`: drop the last exchange.
    Undo,
    /// `/system TEXT`: set the system prompt.
    System(String),
    /// `/save FILE`
    Save(PathBuf),
    /// `/load FILE`
    Load(PathBuf),
    /// `/stats`
    Stats,
    /// `/exit` (or `/quit`)
    Exit,
}

impl Command {
    /// Whether the command may change the conversation (its messages, its
    /// system prompt or its cache), so that the `--session` file must
    /// follow. `/save` writes the conversation elsewhere without changing
    /// it; `/regen` changes it through the answer it streams.
    pub fn mutates(&self) -> bool {
        match self {
            Command::Clear
            | Command::Regen
            | Command::Undo
            | Command::System(_)
            | Command::Load(_) => true,
            Command::Help | Command::Save(_) | Command::Stats | Command::Exit => false,
        }
    }
}

/// The text of `/help`.
pub const HELP: &str = "\
commands:
  /help          this list
  /clear         forget the conversation (the system prompt stays)
  /regen         sample the last answer again
  /undo          drop the last question and its answer
  /system TEXT   set the system prompt
  /save FILE     save the conversation and its cache
  /load FILE     load a saved conversation
  /stats         context use, last turn's prefill and decode, graph reuse
  /exit          leave (also Ctrl-D, or Ctrl-C on an empty prompt)
input: end a line with \\ to continue it; \"\"\" opens and closes a block of lines.
Ctrl-C while an answer is being written stops it (the answer is kept).";

/// Whether `line` is a command (a `/` followed by a letter); user text
/// like `/ 2` or `//x` is not.
pub fn is_command(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('/') && t[1..].starts_with(|c: char| c.is_ascii_alphabetic())
}

/// Parses a command line (see [`is_command`]); the error is the message
/// to show.
pub fn parse(line: &str) -> Result<Command, String> {
    let t = line.trim();
    let (name, rest) = match t.split_once(char::is_whitespace) {
        Some((n, r)) => (n, r.trim()),
        None => (t, ""),
    };
    let none = |c: Command| {
        if rest.is_empty() {
            Ok(c)
        } else {
            Err(format!("{name} takes no argument"))
        }
    };
    let file = |c: fn(PathBuf) -> Command| {
        if rest.is_empty() {
            Err(format!("{name} needs a file name"))
        } else {
            Ok(c(PathBuf::from(rest)))
        }
    };
    match name {
        "/help" | "/?" => none(Command::Help),
        "/clear" => none(Command::Clear),
        "/regen" => none(Command::Regen),
        "/undo" => none(Command::Undo),
        "/stats" => none(Command::Stats),
        "/exit" | "/quit" => none(Command::Exit),
        "/system" if rest.is_empty() => Err("/system needs the text of the system prompt".into()),
        "/system" => Ok(Command::System(rest.to_string())),
        "/save" => file(Command::Save),
        "/load" => file(Command::Load),
        _ => Err(format!("unknown command {name} (/help lists them)")),
    }
}

/// The `/stats` text.
pub fn format_stats(s: &ChatStats) -> String {
    let mut out = format!(
        "context: {} of {} tokens | cells used: {} | messages: {}",
        s.tokens_in_context, s.n_ctx, s.cells_used, s.messages
    );
    match &s.last_turn {
        Some(t) => {
            out.push_str(&format!(
                "\nlast turn: prefill {} tokens (kept {}) in {:.3} s ({:.1} t/s), first token after {:.3} s | decode {} tokens in {:.2} s ({:.1} t/s) | stop: {}",
                t.start.prefill_tokens,
                t.start.kept_tokens,
                t.prefill_secs,
                t.prefill_rate(),
                t.first_token_secs,
                t.generated_tokens,
                t.decode_secs,
                t.decode_rate(),
                t.stop_reason,
            ));
            if let Some(at) = t.start.mismatch_at {
                out.push_str(&format!(" | re-prefilled from token {at}"));
            }
            if t.start.dropped_exchanges > 0 {
                out.push_str(&format!(
                    " | {} old exchange(s) dropped",
                    t.start.dropped_exchanges
                ));
            }
        }
        None => out.push_str("\nlast turn: none yet"),
    }
    if let Some(sp) = &s.spec {
        out.push_str(&format!(
            "\nspeculation: {}",
            crate::spec::format_counts(sp)
        ));
        if let Some(t) = &s.last_turn {
            out.push_str(&format!(
                " | last turn: {}",
                crate::spec::format_counts(&t.spec)
            ));
        }
    }
    out.push_str(&format!(
        "\ngraphs: {} built, {} reused",
        s.graph_builds, s.graph_reuses
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_unknown_ones_are_errors() {
        assert_eq!(parse("/regen"), Ok(Command::Regen));
        assert_eq!(
            parse(" /system  Be brief. "),
            Ok(Command::System("Be brief.".into()))
        );
        assert_eq!(
            parse("/save a b.session"),
            Ok(Command::Save("a b.session".into()))
        );
        assert!(parse("/save").is_err());
        assert!(parse("/stats now").is_err());
        assert!(parse("/frobnicate")
            .unwrap_err()
            .contains("unknown command /frobnicate"));
        assert!(is_command("/help") && !is_command("/ 2") && !is_command("hello /x"));
    }

    /// Which commands make the `--session` file follow: decided by the
    /// command, never by the words of its confirmation.
    #[test]
    fn exactly_the_commands_that_change_the_conversation_mutate() {
        let mutating = [
            "/clear",
            "/regen",
            "/undo",
            "/system Be brief.",
            "/load a.session",
        ];
        let reading = ["/help", "/?", "/stats", "/save a.session", "/exit", "/quit"];
        for line in mutating {
            assert!(parse(line).unwrap().mutates(), "{line}");
        }
        for line in reading {
            assert!(!parse(line).unwrap().mutates(), "{line}");
        }
    }
}
