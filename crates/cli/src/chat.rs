//! `minfer chat`: a conversation in the terminal, or over a pipe.
//!
//! The conversation itself (delta prefill, context shift, session files)
//! is the engine's [`ChatSession`]; this file is the terminal around it:
//! line editing, multi-line input, streaming, colours, Ctrl-C, commands.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use minfer_engine::{
    ChatSession, EngineError, LoadedModel, Scheduler, StopReason, Store, TurnStart, Utf8Stream,
};
use rustyline::error::ReadlineError;
use rustyline::{
    Cmd, ConditionalEventHandler, DefaultEditor, Event, EventContext, EventHandler, KeyEvent,
    Movement, RepeatCount,
};

use crate::chat_cmds::{self, Command};
use crate::run::DEFAULT_MODEL;
use crate::runtime::{self, RuntimeArgs};
use crate::sampling::SamplingArgs;

/// Arguments of `minfer chat`.
#[derive(clap::Args)]
pub struct Args {
    /// The model: a file, a known name or hf:… (default
    /// qwen2.5-coder-0.5b-instruct, pulled on first use).
    #[arg(value_name = "MODEL")]
    model: Option<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// System prompt (a resumed session keeps its own).
    #[arg(long)]
    system: Option<String>,
    /// Resume the conversation saved in FILE when it exists, and save it
    /// there after every turn.
    #[arg(long, value_name = "FILE")]
    session: Option<PathBuf>,
    #[command(flatten)]
    spec: crate::spec::SpecArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// Terminal styling: ANSI colours on a terminal, plain text otherwise or
/// when `NO_COLOR` is set.
#[derive(Clone, Copy)]
struct Style {
    color: bool,
}

impl Style {
    fn detect() -> Style {
        let no_color = crate::logs::startup().no_color;
        Style {
            color: std::io::stdout().is_terminal() && !no_color,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn prompt(&self) -> String {
        self.paint("1;36", "you>") + " "
    }

    fn continuation(&self) -> String {
        self.paint("2", "...>") + " "
    }
}

/// What the reader got.
enum Input {
    /// A complete message or command.
    Text(String),
    /// The input being typed was abandoned (Ctrl-C on a continuation line).
    Discarded,
    /// Ctrl-D, or Ctrl-C on an empty prompt.
    Exit,
}

/// Ctrl-C at the prompt: leave when the line is empty, else clear it.
struct CtrlC;

impl ConditionalEventHandler for CtrlC {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        if ctx.line().is_empty() {
            Some(Cmd::Interrupt)
        } else {
            Some(Cmd::Kill(Movement::WholeBuffer))
        }
    }
}

/// Reads one message: a line, lines joined by a trailing `\`, or a block
/// between `"""` lines.
fn read_input(rl: &mut DefaultEditor, style: Style) -> Result<Input> {
    let mut buf = String::new();
    let mut block = false;
    loop {
        let prompt = if buf.is_empty() && !block {
            style.prompt()
        } else {
            style.continuation()
        };
        let line = match rl.readline(&prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) if buf.is_empty() && !block => return Ok(Input::Exit),
            Err(ReadlineError::Interrupted) => return Ok(Input::Discarded),
            Err(ReadlineError::Eof) => return Ok(Input::Exit),
            Err(e) => return Err(e.into()),
        };
        if block {
            if let Some(last) = line.trim_end().strip_suffix("\"\"\"") {
                buf.push_str(last);
                return Ok(Input::Text(buf.trim_end_matches('\n').to_string()));
            }
            buf.push_str(&line);
            buf.push('\n');
        } else if let Some(rest) = buf
            .is_empty()
            .then(|| line.trim_start().strip_prefix("\"\"\""))
            .flatten()
        {
            if let Some(one) = rest.trim_end().strip_suffix("\"\"\"") {
                return Ok(Input::Text(one.to_string()));
            }
            block = true;
            if !rest.is_empty() {
                buf.push_str(rest);
                buf.push('\n');
            }
        } else if let Some(part) = line.strip_suffix('\\') {
            buf.push_str(part);
            buf.push('\n');
        } else {
            buf.push_str(&line);
            return Ok(Input::Text(buf));
        }
    }
}

/// The conversation and the terminal it runs in.
struct Chat<'a> {
    model: &'a LoadedModel,
    sched: Scheduler,
    session: ChatSession,
    style: Style,
    interactive: bool,
    verbose: bool,
    save_to: Option<PathBuf>,
    /// Set by Ctrl-C while an answer is being generated.
    interrupted: Arc<AtomicBool>,
    /// Whether an answer is being generated (Ctrl-C at other times ends
    /// the program).
    generating: Arc<AtomicBool>,
    /// Set by Ctrl-C while no answer is being generated: the chat ends
    /// after the current input, through the same path as `/exit`.
    quit: Arc<AtomicBool>,
    /// Whether the conversation changed since the `--session` file was
    /// last written.
    dirty: bool,
    shift_told: bool,
}

/// What to do after an input.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

/// How a chat ended, which decides the exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `/exit`, Ctrl-D, Ctrl-C on an empty prompt, the end of piped input.
    Done,
    /// Ctrl-C (SIGINT) while no answer was being written and no prompt
    /// was reading: the shell's convention for a death by SIGINT.
    Interrupted,
}

impl End {
    /// The process's exit status: 0, or 130 after an interrupt.
    pub fn exit_code(self) -> ExitCode {
        match self {
            End::Done => ExitCode::SUCCESS,
            End::Interrupted => ExitCode::from(130),
        }
    }
}

/// What a command did: the confirmation to show, and whether the
/// conversation changed.
struct Reply {
    say: String,
    changed: bool,
}

impl Chat<'_> {
    /// A notice on stderr (dim on a terminal).
    fn notice(&self, msg: &str) {
        eprintln!("{}", self.style.paint("2", msg));
    }

    fn error(&self, msg: &str) {
        eprintln!("{} {msg}", self.style.paint("31", "error:"));
    }

    /// Output of a command: stdout in a terminal; stderr when piped, so
    /// that stdout holds only the answers.
    fn say(&self, msg: &str) {
        if self.interactive {
            println!("{msg}");
        } else {
            eprintln!("{msg}");
        }
    }

    /// Saves to the `--session` file, if any.
    fn autosave(&mut self) {
        if let Some(path) = self.save_to.clone() {
            match self.session.save(self.model, &self.sched, &path) {
                Ok(()) => self.dirty = false,
                Err(e) => self.error(&format!("{e:#}")),
            }
        }
    }

    /// Whether Ctrl-C asked the chat to end.
    fn quit_requested(&self) -> bool {
        self.quit.load(Ordering::SeqCst)
    }

    /// The last step of every way out: the `--session` file gets what
    /// changed since it was last written (an answer cut short by an
    /// error, say); returns how the chat ended.
    fn close(&mut self) -> End {
        if self.dirty {
            self.autosave();
        }
        if self.quit_requested() {
            End::Interrupted
        } else {
            End::Done
        }
    }

    /// Streams the answer of a started turn. Returns whether it was
    /// interrupted.
    fn answer(&mut self, start: TurnStart) -> Result<bool> {
        if start.dropped_exchanges > 0 && !self.shift_told {
            self.shift_told = true;
            self.notice(&format!(
                "[the conversation no longer fits in {} tokens: the oldest exchanges are dropped from now on; the system prompt stays]",
                self.sched.runtime().n_ctx()
            ));
        }
        if self.verbose {
            match (start.mismatch_at, start.dropped_exchanges) {
                (Some(at), 0) => self.notice(&format!(
                    "[the cache differs from the conversation at token {at}: re-prefilling from there]"
                )),
                (Some(at), n) => self.notice(&format!(
                    "[{n} old exchange(s) dropped: re-prefilling from token {at}]"
                )),
                (None, _) => {}
            }
            self.notice(&format!(
                "[prefill {} tokens, {} kept from the cache]",
                start.prefill_tokens, start.kept_tokens
            ));
        }
        self.dirty = true;
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let mut utf8 = Utf8Stream::new();
        let mut write_err = None;
        self.interrupted.store(false, Ordering::SeqCst);
        self.generating.store(true, Ordering::SeqCst);
        let interrupted = self.interrupted.clone();
        let result = self.session.complete(
            self.model,
            &mut self.sched,
            |b| {
                let s = utf8.push(b);
                match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
                    Ok(()) => true,
                    Err(e) => {
                        write_err = Some(e);
                        false
                    }
                }
            },
            || !interrupted.load(Ordering::SeqCst),
        );
        self.generating.store(false, Ordering::SeqCst);
        if let Some(e) = write_err {
            return Err(e.into());
        }
        write!(out, "{}", utf8.finish())?;
        writeln!(out)?;
        out.flush()?;
        drop(out);
        let turn = match result {
            Ok(turn) => turn,
            Err(e) => {
                // The answer so far is kept; the conversation goes on.
                self.error(&e.to_string());
                return Ok(false);
            }
        };
        let was_interrupted = self.interrupted.swap(false, Ordering::SeqCst);
        match turn.stop_reason {
            StopReason::Eog | StopReason::StopString => {}
            StopReason::Cancelled if was_interrupted => self.notice("[interrupted]"),
            reason => self.notice(&format!("[stopped: {reason}]")),
        }
        if self.interactive {
            println!();
        }
        self.autosave();
        Ok(was_interrupted)
    }

    /// Handles one message or command.
    fn handle(&mut self, text: &str) -> Result<Flow> {
        if chat_cmds::is_command(text) {
            return match chat_cmds::parse(text) {
                Ok(cmd) => self.command(cmd),
                Err(msg) => {
                    self.error(&msg);
                    Ok(Flow::Continue)
                }
            };
        }
        if text.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        match self.session.send(self.model, &mut self.sched, text) {
            Ok(start) => {
                let interrupted = self.answer(start)?;
                if interrupted && !self.interactive {
                    return Ok(Flow::Exit);
                }
            }
            Err(e) => self.error(&e.to_string()),
        }
        Ok(Flow::Continue)
    }

    fn command(&mut self, cmd: Command) -> Result<Flow> {
        let (m, s) = (self.model, &mut self.sched);
        let said = |say: String| Reply {
            say,
            changed: cmd.mutates(),
        };
        let outcome = match &cmd {
            Command::Help => Ok(said(chat_cmds::HELP.to_string())),
            Command::Exit => return Ok(Flow::Exit),
            Command::Stats => self
                .session
                .stats(s)
                .map(|st| said(chat_cmds::format_stats(&st))),
            Command::Regen => match self.session.regen(m, s) {
                // The answer saves the conversation itself.
                Ok(start) => {
                    self.answer(start)?;
                    return Ok(Flow::Continue);
                }
                Err(e) => Err(e),
            },
            Command::Undo => self.session.undo(m, s).map(|done| Reply {
                say: if done {
                    "[the last exchange is gone]".to_string()
                } else {
                    "[nothing to undo]".to_string()
                },
                changed: done,
            }),
            Command::Clear => self
                .session
                .clear(m, s)
                .map(|()| said("[conversation cleared; the system prompt stays]".to_string())),
            Command::System(text) => self
                .session
                .set_system(m, s, text)
                .map(|()| said("[system prompt set]".to_string())),
            Command::Save(path) => self
                .session
                .save(m, s, path)
                .map(|()| said(format!("[saved to {}]", path.display()))),
            Command::Load(path) => self.session.load(m, s, path).map(|()| {
                said(format!(
                    "[loaded {}: {} messages, {} tokens, nothing recomputed]",
                    path.display(),
                    self.session.messages().len(),
                    s.runtime().n_past(self.session.sequence()).unwrap_or(0)
                ))
            }),
        };
        match outcome {
            Ok(reply) => {
                self.say(&reply.say);
                if reply.changed {
                    self.dirty = true;
                    self.autosave();
                }
            }
            Err(e) => self.error(&e.to_string()),
        }
        Ok(Flow::Continue)
    }
}

/// `minfer chat`. Every way out (`/exit`, Ctrl-D, Ctrl-C, the end of
/// piped input, an error) writes the `--session` file if the conversation
/// changed since it was saved, and the `--trace`.
pub fn run(store: &Store, args: Args) -> Result<End> {
    let gen = args.sampling.generate_config()?;
    let engine_cfg = args.runtime.engine_config()?;
    args.spec.check()?;
    let spec = args
        .model
        .clone()
        .unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let diag = crate::trace::Diag::start(&args.runtime.diag)?;
    let model = runtime::load(store, &spec)?;
    if diag.dump_graphs(&model, engine_cfg, DUMP_PROMPT_TOKENS)? {
        return Ok(End::Done);
    }
    let mut sched = model.scheduler(engine_cfg)?;
    sched.set_speculation(args.spec.speculation(store, &model, engine_cfg)?);
    let mut session = match ChatSession::new(&model, &mut sched, args.system.as_deref(), gen) {
        Err(EngineError::NoTemplate) => bail!(
            "{} has no chat template, which minfer chat needs (minfer run --no-template sends raw text)",
            model.name()
        ),
        r => r?,
    };
    if let Some(path) = args.session.as_deref().filter(|p| p.exists()) {
        session.load(&model, &mut sched, path)?;
    }
    let interactive = std::io::stdin().is_terminal();
    let interrupted = Arc::new(AtomicBool::new(false));
    let generating = Arc::new(AtomicBool::new(false));
    let quit = Arc::new(AtomicBool::new(false));
    // Piped input is read on a thread of its own, so that Ctrl-C can end a
    // wait for the next line by a message instead of leaving at once.
    let (line_tx, lines) = mpsc::channel();
    {
        let (interrupted, generating, quit) =
            (interrupted.clone(), generating.clone(), quit.clone());
        let wake = line_tx.clone();
        ctrlc::set_handler(move || {
            if generating.load(Ordering::SeqCst) {
                interrupted.store(true, Ordering::SeqCst);
            } else {
                quit.store(true, Ordering::SeqCst);
                let _ = wake.send(Piped::Interrupt);
            }
        })
        .context("cannot install the Ctrl-C handler")?;
    }
    let mut chat = Chat {
        model: &model,
        sched,
        session,
        style: Style::detect(),
        interactive,
        // The global -v: what each turn evaluates, and when the cache had
        // to be re-evaluated because the template rewrote earlier text.
        verbose: crate::logs::startup().verbose > 0,
        save_to: args.session.clone(),
        interrupted,
        generating,
        quit,
        dirty: false,
        shift_told: false,
    };
    let result = if interactive {
        drop(line_tx);
        repl(&mut chat, args.session.as_deref())
    } else {
        read_stdin(line_tx);
        piped(&mut chat, &lines)
    };
    let end = chat.close();
    crate::runtime::log_kv_usage(chat.sched.runtime());
    // The trace is written even when the chat failed; the failure wins.
    let traced = diag.finish();
    result.and(traced).map(|()| end)
}

/// The prompt length of the prefill graph `--dump-graph` shows when there
/// is no prompt yet.
const DUMP_PROMPT_TOKENS: usize = 32;

fn repl(chat: &mut Chat, session: Option<&Path>) -> Result<()> {
    let mut rl = DefaultEditor::new()?;
    rl.bind_sequence(
        KeyEvent::ctrl('C'),
        EventHandler::Conditional(Box::new(CtrlC)),
    );
    let resumed = match session {
        Some(p) if !chat.session.messages().is_empty() => {
            format!(
                " · resumed {} ({} messages)",
                p.display(),
                chat.session.messages().len()
            )
        }
        _ => String::new(),
    };
    chat.notice(&format!(
        "minfer chat · {} · context {} tokens{resumed} · /help for commands, Ctrl-D to leave",
        chat.model.name(),
        chat.sched.runtime().n_ctx()
    ));
    loop {
        // A Ctrl-C outside the prompt (raw mode reads it as a key there).
        if chat.quit_requested() {
            return Ok(());
        }
        let text = match read_input(&mut rl, chat.style)? {
            Input::Text(t) => t,
            Input::Discarded => continue,
            Input::Exit => return Ok(()),
        };
        if !text.trim().is_empty() {
            let _ = rl.add_history_entry(text.as_str());
        }
        if chat.handle(&text)? == Flow::Exit {
            return Ok(());
        }
    }
}

/// What the piped chat waits for.
enum Piped {
    /// A line of stdin.
    Line(String),
    /// stdin could not be read.
    Failed(std::io::Error),
    /// The end of stdin.
    Eof,
    /// Ctrl-C while no answer was being written.
    Interrupt,
}

/// Reads stdin line by line into `tx`, on a thread of its own, until its
/// end, a read error, or the chat no longer listening.
fn read_stdin(tx: Sender<Piped>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let (msg, last) = match line {
                Ok(l) => (Piped::Line(l), false),
                Err(e) => (Piped::Failed(e), true),
            };
            if tx.send(msg).is_err() || last {
                return;
            }
        }
        let _ = tx.send(Piped::Eof);
    });
}

/// Piped stdin: every line is a message (or a command); answers go to
/// stdout, one after the other.
fn piped(chat: &mut Chat, lines: &Receiver<Piped>) -> Result<()> {
    while !chat.quit_requested() {
        let line = match lines.recv() {
            Ok(Piped::Line(l)) => l,
            Ok(Piped::Failed(e)) => return Err(e.into()),
            Ok(Piped::Eof | Piped::Interrupt) | Err(_) => break,
        };
        if chat.handle(&line)? == Flow::Exit {
            break;
        }
    }
    Ok(())
}
