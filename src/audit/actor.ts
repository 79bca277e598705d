// Who acts on a change that the history records: an API token during a request, or no token
// at all (the command-line tool, the first start, the service's own work).

/** Who acts: an API token during a request, or the command-line tool (no token). */
export interface Actor {
  tokenId: number | null;
  requestId: string | null;
}

/** The command-line tool, the first start and the service's own work: no API token, no request. */
export const NO_TOKEN_ACTOR: Actor = { tokenId: null, requestId: null };
