//! `idemkey-bench`: glue only (see the library and docs/operations.md).

use clap::Parser;
use idemkey_bench::{cli::Args, report, sql, suite};

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.print_pgbench {
        print!(
            "-- claim_complete.sql\n{}\n-- find.sql\n{}",
            sql::claim_complete_script()?,
            sql::find_script(args.replay_keys)?
        );
        return Ok(());
    }
    if args.list {
        print!("{}", suite::list());
        return Ok(());
    }
    let out = args.out.clone();
    let report_readme = args.readme.clone();
    let report = match &args.render {
        Some(json) => serde_json::from_str(&std::fs::read_to_string(json)?)?,
        None => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads.max(1))
            .enable_all()
            .build()?
            .block_on(suite::run(args))?,
    };
    suite::write(&report, &out)?;
    if let Some(readme) = &report_readme {
        let doc = std::fs::read_to_string(readme)?;
        let section = format!(
            "{}\n![benchmark chart: throughput and latency]({}/latest.svg)\n",
            report.markdown(),
            out.display()
        );
        let updated = report::splice(&doc, &section).ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no bench:start / bench:end markers",
                readme.display()
            )
        })?;
        std::fs::write(readme, updated)?;
    }
    println!("{}", report.markdown());
    println!(
        "wrote {0}/latest.json, {0}/latest.svg, {0}/latest.md",
        out.display()
    );
    Ok(())
}
