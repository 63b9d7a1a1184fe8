export { IdemkeyClient, encodeSegment } from "./client.js";
export type { ClientOptions, ClaimOptions } from "./client.js";
export * from "./errors.js";
export { newKey, keyTimestamp, isUuidV7 } from "./key.js";
export type * from "./types.js";
