//! Service account tokens (`serviceaccounts/NAME/token`): JWTs shaped like the real ones
//! (issuer, audiences, `sub` `system:serviceaccount:NS:NAME`, the `kubernetes.io` claim with
//! the service account and the bound object), but signed with HMAC-SHA256 (`HS256`) under a
//! key the dev cluster draws at start and never shows: it has no RSA key pair to sign `RS256`
//! with, and only it needs to check them. Tokens therefore stop working when the cluster
//! restarts. This module signs and checks; which objects a token names is checked by the
//! caller.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde_json::{Value, json};

/// The issuer, and the audience the API server itself accepts (a kubeadm cluster's default).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The `kid` of the header: says where the token comes from.
const KEY_ID: &str = "bosun-devcluster-hs256";

/// Why a token is not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON.
    #[error("the token is not a JWT")]
    Malformed,
    /// Not `HS256` with this cluster's key id.
    #[error("the token was not signed by this dev cluster")]
    Foreign,
    /// The signature does not match the header and claims.
    #[error("the token's signature is invalid")]
    Signature,
    /// `exp` has passed.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is still to come.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `iss` is not this cluster or `aud` does not include the API server.
    #[error("the token is not meant for this API server")]
    Audience,
}

/// The key that signs and checks the cluster's service account tokens.
pub struct TokenKey {
    key: hmac::Key,
}

impl Default for TokenKey {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenKey {
    /// A fresh random key.
    pub fn new() -> Self {
        let rng = ring::rand::SystemRandom::new();
        TokenKey { key: hmac::Key::generate(hmac::HMAC_SHA256, &rng).expect("the system's random source") }
    }

    /// The signed token of `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "HS256", "kid": KEY_ID});
        let encode = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap_or_default());
        let signed = format!("{}.{}", encode(&header), encode(claims));
        let tag = hmac::sign(&self.key, signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// The claims of a token this key signed, if it is valid at `now` (Unix seconds) and meant
    /// for the API server.
    pub fn verify(&self, token: &str, now: i64) -> Result<Value, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(TokenError::Malformed);
        };
        let decode = |part: &str| -> Result<Value, TokenError> {
            let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Malformed)?;
            serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed)
        };
        let head = decode(header)?;
        if head["alg"] != "HS256" || head["kid"] != KEY_ID {
            return Err(TokenError::Foreign);
        }
        let tag = URL_SAFE_NO_PAD.decode(signature).map_err(|_| TokenError::Malformed)?;
        let signed = &token[..header.len() + 1 + claims.len()];
        hmac::verify(&self.key, signed.as_bytes(), &tag).map_err(|_| TokenError::Signature)?;
        let claims = decode(claims)?;
        if claims["exp"].as_i64().is_none_or(|exp| exp <= now) {
            return Err(TokenError::Expired);
        }
        if claims["nbf"].as_i64().is_some_and(|nbf| nbf > now) {
            return Err(TokenError::NotYetValid);
        }
        let for_us = claims["aud"].as_array().is_some_and(|a| a.iter().any(|x| x == ISSUER));
        if claims["iss"] != ISSUER || !for_us {
            return Err(TokenError::Audience);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(nbf: i64, exp: i64, aud: &str) -> Value {
        json!({"iss": ISSUER, "aud": [aud], "sub": "system:serviceaccount:default:default", "nbf": nbf, "iat": nbf, "exp": exp})
    }

    #[test]
    fn tokens_are_accepted_only_when_signed_here_current_and_for_the_api_server() {
        let key = TokenKey::new();
        let other = TokenKey::new();
        let good = key.sign(&claims(100, 200, ISSUER));
        let mut tampered = good.clone();
        let middle: Vec<&str> = good.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims(100, 99_999, ISSUER)).unwrap());
        tampered = tampered.replace(middle[1], &forged);
        let foreign_header = format!("{}.{}.{}", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), middle[1], middle[2]);
        let cases: &[(&str, String, i64, Result<(), TokenError>)] = &[
            ("valid", good.clone(), 150, Ok(())),
            ("expired", good.clone(), 200, Err(TokenError::Expired)),
            ("not yet valid", good.clone(), 99, Err(TokenError::NotYetValid)),
            ("tampered claims", tampered, 150, Err(TokenError::Signature)),
            ("another cluster's key", other.sign(&claims(100, 200, ISSUER)), 150, Err(TokenError::Signature)),
            ("another audience", key.sign(&claims(100, 200, "vault")), 150, Err(TokenError::Audience)),
            ("unsigned", foreign_header, 150, Err(TokenError::Foreign)),
            ("not a jwt", "abc".into(), 150, Err(TokenError::Malformed)),
            ("four parts", format!("{good}.x"), 150, Err(TokenError::Malformed)),
        ];
        for (what, token, now, want) in cases {
            assert_eq!(key.verify(token, *now).map(|_| ()), *want, "{what}");
        }
    }

    #[test]
    fn a_token_is_three_base64url_parts_with_the_claims_in_the_middle() {
        let key = TokenKey::new();
        let token = key.sign(&claims(1, 2, ISSUER));
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')));
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, json!({"alg": "HS256", "kid": KEY_ID}));
    }
}
