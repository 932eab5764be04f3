//! The `zarrd` command line: parse, build the configuration, run.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::sync::Arc;
use zarrd::config::{Config, LogFormat, ServeArgs};

use zarrd::http::{serve, AppState};
use zarrd::logging::{Lines, Writer};
use zarrd::store::Store;

#[derive(Parser)]
#[command(name = "zarrd", version, about = "An HTTP data server for Zarr")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a Zarr store over HTTP
    Serve(ServeArgs),
}

/// Logging to standard error; the lines are flushed once more on return.
fn init_logging(format: LogFormat) -> Arc<Lines<std::io::Stderr>> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ZARRD_LOG")
        .unwrap_or_else(|_| "zarrd=info".into());
    let lines = Lines::stderr();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Writer(lines.clone()))
        // Colours for a terminal only, not into a file or a collector.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let json = matches!(format, LogFormat::Json);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
    if tracing::enabled!(target: "zarrd::access", tracing::Level::INFO) {
        zarrd::logging::start_access(lines.clone(), json);
    }
    lines
}

// glibc's malloc kept freed multi-megabyte chunk buffers in per-thread
// arenas: a whole-array stream with a 64 MiB cache peaked at 345 MiB for a
// 256 MiB array and 613 MiB for one four times larger. mimalloc returns
// freed pages and is as fast on the small allocations of a request.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // `--help` states each option's default as `config.rs` declares it.
    let command = Cli::command().mut_subcommand("serve", zarrd::config::with_defaults_in_help);
    let cli = Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    let Command::Serve(args) = cli.command;
    let config = match Config::resolve(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zarrd: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let lines = init_logging(config.log_format);
    raise_file_limit();
    // Decoding, drawing and building large answers run on rayon's threads,
    // a little below the threads that answer requests: when the cores are
    // busy with them, a probe or a small read still gets its turn at once.
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .start_handler(|_| lower_this_threads_priority())
        .build_global()
    {
        tracing::warn!(error = %e, "the decoding pool keeps its default set-up");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zarrd: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(config));
    lines.flush();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zarrd: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Threads for blocking file I/O at most (tokio's default is 512). Stores
/// zarrd reads through other crates (Icechunk repositories on a local
/// directory) read files in 8 KiB pieces, each on this pool: one whole-array
/// read started over 300 threads, and each kept its allocator's pages, so
/// memory grew with every such read. 64 reads in flight keep local disks
/// and network file systems busy.
const MAX_BLOCKING_THREADS: usize = 64;

/// Raise the soft limit on open files to the hard one: a server holds a
/// descriptor per connection and per file it keeps open, and a soft limit
/// of 1024 (common under systemd and container runtimes) is soon reached.
fn raise_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                tracing::debug!("could not raise the open file limit");
            }
        }
    }
}

/// Lower the calling thread's scheduling priority by a few steps (Linux
/// schedules threads, so this is the thread's own nice value).
fn lower_this_threads_priority() {
    // SAFETY: gettid and setpriority take and change nothing but the
    // calling thread's priority.
    unsafe {
        let tid = libc::gettid();
        if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 5) != 0 {
            tracing::debug!("could not lower a decoding thread's priority");
        }
    }
}

async fn run(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    let mounts: Vec<_> = config
        .mounts
        .iter()
        .map(|m| (m.name.clone(), m.source.clone(), m.read_only))
        .collect();
    let store = if config.demo {
        Store::mount_all(zarrd::demo::store().await?, &mounts).await?
    } else {
        Store::serve(
            &config.root,
            &config.reference_targets,
            config.read_only,
            &mounts,
        )
        .await?
    };
    serve(AppState::new(store, config)).await?;
    Ok(())
}
