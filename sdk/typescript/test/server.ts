/**
 * Starts a real idemkey server for the tests: a free port, its own temp data
 * dir (embedded SQLite), readiness by polling /readyz, dev tokens minted with
 * `idemkey token` on the same data dir, SIGKILL + restart on the same port.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, closeSync, rmSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";

const here = dirname(fileURLToPath(import.meta.url)); // sdk/typescript/build/test
export const SDK_DIR = resolve(here, "../..");
export const REPO_ROOT = resolve(SDK_DIR, "../..");
export const SCENARIOS_FILE = resolve(SDK_DIR, "../scenarios.json");

export function idemkeyBin(): string {
  const bin = process.env.IDEMKEY_BIN ?? join(REPO_ROOT, "target/debug/idemkey");
  if (!existsSync(bin)) {
    throw new Error(`idemkey binary not found at ${bin}: run \`cargo build --workspace --bins\` (or set IDEMKEY_BIN)`);
  }
  return bin;
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", rej);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class TestServer {
  private proc: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly tokens = new Map<string, string>();
  readonly workDir: string;
  readonly dataDir: string;
  readonly logFile: string;

  private constructor(
    readonly port: number,
    private readonly extraEnv: Record<string, string>,
  ) {
    this.workDir = mkdtempSync(join(tmpdir(), "idemkey-ts-"));
    this.dataDir = join(this.workDir, "data");
    this.logFile = join(this.workDir, "server.log");
  }

  static async start(extraEnv: Record<string, string> = {}): Promise<TestServer> {
    const s = new TestServer(await freePort(), extraEnv);
    await s.start();
    return s;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private env(): NodeJS.ProcessEnv {
    return {
      ...process.env,
      IDEMKEY_LISTEN: `127.0.0.1:${this.port}`,
      IDEMKEY_DATA_DIR: this.dataDir,
      RUST_LOG: process.env.RUST_LOG ?? "warn",
      ...this.extraEnv,
    };
  }

  /** Starts (or restarts) the process and waits until /readyz answers 200. */
  async start(): Promise<void> {
    const bin = idemkeyBin();
    const log = openSync(this.logFile, "a");
    const proc = spawn(bin, [], { env: this.env(), stdio: ["ignore", log, log] });
    closeSync(log);
    this.proc = proc;
    let exitedEarly = false;
    this.exited = new Promise((res) =>
      proc.once("exit", () => {
        exitedEarly = true;
        res();
      }),
    );
    const until = Date.now() + 30_000;
    for (;;) {
      if (exitedEarly) throw new Error(`idemkey exited during start-up; log:\n${readFileSync(this.logFile, "utf8").slice(-4000)}`);
      try {
        const res = await fetch(`${this.baseUrl}/readyz`, { signal: AbortSignal.timeout(1_000) });
        await res.text();
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > until) throw new Error(`idemkey not ready after 30 s; log:\n${readFileSync(this.logFile, "utf8").slice(-4000)}`);
      await sleep(25);
    }
  }

  /** Kills the process with SIGKILL and waits for it to be gone. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) return;
    p.kill("SIGKILL");
    await this.exited;
  }

  async stop(): Promise<void> {
    const p = this.proc;
    if (p !== undefined && p.exitCode === null && p.signalCode === null) {
      p.kill("SIGTERM");
      const timer = setTimeout(() => p.kill("SIGKILL"), 5_000);
      await this.exited;
      clearTimeout(timer);
    }
    this.proc = undefined;
    rmSync(this.workDir, { recursive: true, force: true });
  }

  /** A dev token for `tenant` (default roles client,viewer,admin). */
  token(tenant: string, roles = "client,viewer,admin"): string {
    const k = `${tenant}|${roles}`;
    let t = this.tokens.get(k);
    if (t === undefined) {
      t = execFileSync(idemkeyBin(), ["token", "--tenant", tenant, "--roles", roles], { env: this.env(), encoding: "utf8" }).trim();
      this.tokens.set(k, t);
    }
    return t;
  }
}

/** A fresh tenant name for one test. */
export function freshTenant(): string {
  return `t-${randomUUID().slice(0, 12)}`;
}
