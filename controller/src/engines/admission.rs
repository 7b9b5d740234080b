//! The admission webhook endpoint (issue 13): the certificate it serves with. When no
//! certificate files are given, the controller makes a CA of its own and a serving
//! certificate for the names the API server reaches it by: the Service's DNS names
//! (`--admission-service NS/NAME`) or, in development, the loopback names; the CA goes into
//! the webhook configurations' `caBundle`. The certificates are made by the dev cluster's
//! `tls` module, which makes its own the same way.

pub use bosun_devcluster::tls::{Error as TlsError, Tls};

/// The names a serving certificate covers: the Service's DNS names, in every form a client
/// in the cluster may use, and the loopback names (the dev cluster, a controller on a laptop).
pub fn serving_names(service: Option<(&str, &str)>) -> Vec<String> {
    let mut names = Vec::new();
    if let Some((namespace, name)) = service {
        names.extend([
            name.to_string(),
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]);
    }
    names.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    names
}

/// A new CA and a serving certificate for `serving_names(service)`.
pub fn self_signed(service: Option<(&str, &str)>) -> Result<Tls, TlsError> {
    Tls::generate_for("bosun-admission-ca", "bosun-admission", &serving_names(service))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_devcluster::tls::verify;

    #[test]
    fn the_generated_chain_validates_for_the_names_given_and_no_others() {
        /// The Service, the names the chain is valid for, names it is not.
        type Case<'a> = (Option<(&'a str, &'a str)>, &'a [&'a str], &'a [&'a str]);
        let cases: [Case; 2] = [
            (
                Some(("ops", "bosun")),
                &["bosun", "bosun.ops", "bosun.ops.svc", "bosun.ops.svc.cluster.local", "localhost", "127.0.0.1", "::1"],
                &["bosun.other.svc", "other.ops.svc", "10.96.0.1"],
            ),
            (None, &["localhost", "127.0.0.1", "::1"], &["bosun.ops.svc", "example.com"]),
        ];
        for (service, valid, invalid) in cases {
            let tls = self_signed(service).unwrap();
            for name in valid {
                assert_eq!(verify(&tls.ca_pem, tls.cert_pem(), name), Ok(()), "{service:?}: {name}");
            }
            for name in invalid {
                assert!(verify(&tls.ca_pem, tls.cert_pem(), name).is_err(), "{service:?}: {name} is not named");
            }
        }
    }
}
