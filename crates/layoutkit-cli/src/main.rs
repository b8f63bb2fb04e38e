//! `layoutkit`: describe, locate and convert tensor memory layouts from the command line.
//!
//! Exit status: 0 on success, 2 for bad input (one `error:` line on stderr), 1 for an internal
//! failure or a failed write (no space left, a closed pipe: see `files`). With `--json`, stdout
//! holds one JSON document and nothing else (on stderr when stdout carries the output file).

/// `println!` that ends the process quietly when stdout is closed (e.g. piped into `head`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            $crate::exit_on_stdout_error(e);
        }
    }};
}

/// `print!` with the same treatment as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($arg)*) {
            $crate::exit_on_stdout_error(e);
        }
    }};
}

mod args;
mod commands;
mod error;
mod files;
mod json;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::error::Internal;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return report_clap_error(e),
    };
    let json = cli.json;
    let result = match cli.command {
        None => commands::tour::run(),
        Some(Command::Formats) => commands::formats::run(json),
        Some(Command::Describe(a)) => commands::describe::run(&a, json),
        Some(Command::Locate(a)) => commands::locate::run(&a, json),
        Some(Command::Convert(a)) => commands::convert::run(&a, json),
        Some(Command::Features(a)) => commands::features::run(&a, json),
        Some(Command::Bench(a)) => commands::bench::run(&a, json),
        Some(Command::Conv(c)) => match &c.bench {
            Some(args::ConvSubcommand::Bench(b)) => commands::conv_bench::run(b, json),
            None => commands::conv::run(&c.run, json),
        },
        Some(Command::Pack(a)) => commands::pack::run(&a, json),
        Some(Command::Unpack(a)) => commands::pack::run_unpack(&a, json),
        Some(Command::Tour) => commands::tour::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let line = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {line}");
            if e.downcast_ref::<Internal>().is_some() || write_failed(&e) {
                ExitCode::from(1)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

/// Whether `e` is the system failing to write an output (exit status 1), wherever in the chain
/// of causes the failure is (pack and unpack wrap it in their own error).
fn write_failed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<layoutkit_files::Error>()
            .is_some_and(layoutkit_files::Error::is_write_failure)
            || c.downcast_ref::<layoutkit_model::Error>()
                .is_some_and(layoutkit_model::Error::is_write_failure)
    })
}

/// A closed stdout (broken pipe) ends the process with success; other write errors with 1.
pub(crate) fn exit_on_stdout_error(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("error: cannot write to standard output: {e}");
    std::process::exit(1);
}

/// Help and version go to stdout as clap prints them; usage errors become one `error:` line.
fn report_clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            // clap spreads one message over several lines (the message, missing arguments,
            // tips, usage); keep everything before the usage, on one line.
            let text = e.to_string();
            let message = text.split("Usage:").next().unwrap_or("invalid arguments");
            let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
            let message = message.trim_start_matches("error: ");
            eprintln!("error: {message} (run `layoutkit --help` for usage)");
            ExitCode::from(2)
        }
    }
}
