// Verify an embed token in Go (docs/verify-embed-tokens.md): golang-jwt (v4) checks the
// signature and the claims; go-jose's JSONWebKeySet reads the service's key set.
//
//	UGS_ISSUER=https://ugs.example.com UGS_ACCOUNT=acme go run .   # then one token a line on stdin
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"
	jose "gopkg.in/square/go-jose.v2"
)

// keySet holds the service's public keys, fetched again after 5 minutes (the JWKS's
// max-age), or at once for a kid it does not know (at most every 30 seconds).
type keySet struct {
	url       string
	mu        sync.Mutex
	keys      jose.JSONWebKeySet
	fetchedAt time.Time
}

func (s *keySet) fetch() error {
	response, err := http.Get(s.url)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", s.url, response.StatusCode)
	}
	var keys jose.JSONWebKeySet
	if err := json.NewDecoder(response.Body).Decode(&keys); err != nil {
		return err
	}
	s.keys, s.fetchedAt = keys, time.Now()
	return nil
}

// key is the public key a token's kid names, with the algorithm it is published for.
func (s *keySet) key(kid string) (interface{}, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := s.keys.Key(kid)
	age := time.Since(s.fetchedAt)
	if age > 5*time.Minute || (len(found) == 0 && age > 30*time.Second) {
		if err := s.fetch(); err != nil {
			return nil, "", err
		}
		found = s.keys.Key(kid)
	}
	if len(found) != 1 || !found[0].Valid() || !found[0].IsPublic() {
		return nil, "", fmt.Errorf("no published key %q", kid)
	}
	return found[0].Key, found[0].Algorithm, nil
}

var (
	issuer   = envOr("UGS_ISSUER", "http://127.0.0.1:3000")
	audience = envOr("UGS_AUDIENCE", "ugs:embed")
	account  = os.Getenv("UGS_ACCOUNT") // your account's slug
	// ES256 and RS256 keys; to accept EdDSA tokens too, UGS_JWKS_URL=<issuer>/.well-known/jwks.json?alg=ES256,RS256,EdDSA.
	keys = &keySet{url: envOr("UGS_JWKS_URL", issuer+"/.well-known/jwks.json")}
)

// verifyEmbedToken returns the claims of a genuine, current embed token of this account for this audience.
func verifyEmbedToken(token string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (interface{}, error) {
		kid, _ := t.Header["kid"].(string)
		key, alg, err := keys.key(kid)
		if err != nil {
			return nil, err
		}
		// A key verifies only the algorithm it is published for.
		if t.Method.Alg() != alg {
			return nil, fmt.Errorf("key %q is for %s, not %s", kid, alg, t.Method.Alg())
		}
		return key, nil
	}, jwt.WithValidMethods([]string{"ES256", "RS256", "EdDSA"}))
	if err != nil {
		return nil, err
	}
	// golang-jwt v4 checks exp and nbf when present; require them, and check iss and aud.
	now := time.Now().Unix()
	if !claims.VerifyIssuer(issuer, true) || !claims.VerifyAudience(audience, true) ||
		!claims.VerifyExpiresAt(now, true) || !claims.VerifyNotBefore(now, true) {
		return nil, errors.New("iss, aud, exp or nbf is missing or not as expected")
	}
	if _, named := claims["ugs_user_group_id"].(string); !named {
		return nil, errors.New("ugs_user_group_id is missing")
	}
	// Every account's tokens are signed by the same keys: ugs_account says whose it is.
	if tokenAccount, _ := claims["ugs_account"].(string); tokenAccount != account {
		return nil, errors.New("the embed token is of another account")
	}
	return claims, nil
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func main() {
	if account == "" {
		fmt.Fprintln(os.Stderr, "set UGS_ACCOUNT to the slug of the account whose embed tokens you verify")
		os.Exit(2)
	}
	// One token a line on stdin; one JSON line out for each: its claims, or why it was refused.
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 64*1024), 64*1024)
	out := json.NewEncoder(os.Stdout)
	for lines.Scan() {
		claims, err := verifyEmbedToken(lines.Text())
		if err != nil {
			out.Encode(map[string]string{"error": err.Error()})
		} else {
			out.Encode(map[string]interface{}{"claims": claims})
		}
	}
}
