// Package session is the realm human's browser session: a cookie that
// stands for the human, as the operator secret does, with a CSRF token for
// every write it makes, and the password the operator may set to log in
// without the secret.
//
// Sessions are local state, never events: they live in the store's local
// table l/sess/ and are not replicated.
//
// Tricky bits:
//   - The cookie is "rls_<id>_<secret>". Only the SHA-256 of the secret is
//     stored (realm/secret); the id finds the record, the secret is compared
//     in constant time.
//   - The CSRF token is not stored at all: it is an HMAC of the session's
//     secret, so only a holder of the cookie can compute it, the server
//     recomputes it from the cookie it is sent, and a copy of the store
//     yields neither.
//   - Expiry slides: every use pushes it TTL ahead, never past MaxAge after
//     the login. A use writes at most once a minute.
package session
