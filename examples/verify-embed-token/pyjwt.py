"""Verify an embed token with PyJWT (docs/verify-embed-tokens.md).

Finds the key set from the issuer alone (/.well-known/openid-configuration), or at
UGS_JWKS_URL (to accept EdDSA tokens too: <issuer>/.well-known/jwks.json?alg=ES256,RS256,EdDSA);
PyJWKClient caches it for 5 minutes and fetches it again for a kid it does not know.

    UGS_ISSUER=https://ugs.example.com UGS_ACCOUNT=acme python3 pyjwt.py   # then one token a line on stdin
"""
import json
import os
import sys
import urllib.request

import jwt

ISSUER = os.environ.get("UGS_ISSUER", "http://127.0.0.1:3000")
AUDIENCE = os.environ.get("UGS_AUDIENCE", "ugs:embed")
ACCOUNT = os.environ["UGS_ACCOUNT"]  # your account's slug

# The discovery document names the key set of ES256 and RS256 keys; an EdDSA key is listed only at ?alg=…EdDSA.
JWKS_URL = os.environ.get("UGS_JWKS_URL")
if JWKS_URL is None:
    with urllib.request.urlopen(f"{ISSUER}/.well-known/openid-configuration") as response:
        JWKS_URL = json.load(response)["jwks_uri"]
jwks_client = jwt.PyJWKClient(JWKS_URL, lifespan=300)


def verify_embed_token(token):
    """The claims of a genuine, current embed token of ACCOUNT for AUDIENCE; raises otherwise."""
    signing_key = jwks_client.get_signing_key_from_jwt(token)
    claims = jwt.decode(
        token,
        signing_key.key,
        algorithms=["ES256", "RS256", "EdDSA"],
        issuer=ISSUER,
        audience=AUDIENCE,
        options={"require": ["iss", "aud", "exp", "nbf", "sub", "ugs_account", "ugs_environment", "ugs_user_group_id"]},
    )
    # Every account's tokens are signed by the same keys: ugs_account says whose it is.
    if claims["ugs_account"] != ACCOUNT:
        raise jwt.InvalidTokenError("the embed token is of another account")
    return claims


if __name__ == "__main__":
    # One token a line on stdin; one JSON line out for each: its claims, or why it was refused.
    for line in sys.stdin:
        try:
            print(json.dumps({"claims": verify_embed_token(line.strip())}), flush=True)
        except Exception as error:  # noqa: BLE001 (report every refusal, whatever its kind)
            print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
