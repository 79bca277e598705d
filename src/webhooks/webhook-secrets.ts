// Which secrets sign a delivery, and its webhook-id (docs/api.md, "Webhooks").
import type { Keyring } from '../crypto/keyring.ts';
import type { WebhookEndpointRow } from '../db/schema.ts';

/** The endpoint's secret, and the one before the last rotation while it still signs (24 h). */
export function secretsThatSign(
  keyring: Keyring,
  endpoint: Pick<WebhookEndpointRow, 'secret_sealed' | 'previous_secret_sealed' | 'previous_secret_expires_at'>,
  now: Date,
): string[] {
  const secrets = [keyring.open(endpoint.secret_sealed, 'webhook-secret')];
  if (endpoint.previous_secret_sealed !== null && endpoint.previous_secret_expires_at !== null && endpoint.previous_secret_expires_at > now.toISOString()) {
    secrets.push(keyring.open(endpoint.previous_secret_sealed, 'webhook-secret'));
  }
  return secrets;
}

/** `evt_<account id>_<seq>`: one event of one account, the same on every attempt and every endpoint. */
export function webhookIdOf(accountId: number, seq: number | string): string {
  return `evt_${accountId}_${seq}`;
}
