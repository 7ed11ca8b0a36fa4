//! `--http-endpoint`, as the upstream sidecars take it: `:PORT` or `HOST:PORT`.

use crate::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// Parses `:PORT` (every interface) or `HOST:PORT` (that host, resolved now).
pub fn parse(input: &str) -> Result<SocketAddr> {
    let fail = || Error::HttpEndpoint {
        input: input.to_string(),
    };
    if let Some(port) = input.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| fail())?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Ok(addr) = input.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = input.rsplit_once(':').ok_or_else(fail)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(fail());
    }
    input
        .to_socket_addrs()
        .map_err(|_| fail())?
        .next()
        .ok_or_else(fail)
}

/// Like [`parse`], but an empty (or blank) value means "serve nothing".
pub fn parse_optional(input: &str) -> Result<Option<SocketAddr>> {
    match input.trim() {
        "" => Ok(None),
        s => parse(s).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn accepted_forms() {
        assert_eq!(parse(":8081").unwrap(), addr("0.0.0.0:8081"));
        assert_eq!(parse(":8080").unwrap(), addr("0.0.0.0:8080"));
        assert_eq!(parse("127.0.0.1:0").unwrap(), addr("127.0.0.1:0"));
        assert_eq!(parse("127.0.0.1:9000").unwrap(), addr("127.0.0.1:9000"));
        assert_eq!(parse("[::1]:9").unwrap(), addr("[::1]:9"));
        assert!(parse("localhost:8081").unwrap().ip().is_loopback());
    }

    #[test]
    fn refused_forms() {
        for bad in ["", "8080", "8081", ":", ":x", "host:", ":99999"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn empty_means_off_only_where_asked() {
        assert_eq!(parse_optional("").unwrap(), None);
        assert_eq!(parse_optional("  ").unwrap(), None);
        assert_eq!(parse_optional(":8080").unwrap(), Some(addr("0.0.0.0:8080")));
        assert!(parse_optional("8080").is_err());
    }
}
