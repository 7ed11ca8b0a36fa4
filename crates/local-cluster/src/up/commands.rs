//! How `up` spells the commands it prints for the user to paste.

/// How to spell this binary in the commands printed for the user.
pub fn self_command() -> String {
    let Ok(exe) = std::env::current_exe().and_then(|p| p.canonicalize()) else {
        return "volhealth".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|dir| dir.join("volhealth").canonicalize().is_ok_and(|p| p == exe))
    });
    if on_path {
        "volhealth".into()
    } else {
        exe.display().to_string()
    }
}

/// The command line this `up` was started with, every flag included, to paste to resume it.
pub fn resume_command() -> String {
    let mut words = vec![self_command()];
    words.extend(std::env::args().skip(1));
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as a POSIX shell reads it back: as it is when it holds nothing the shell treats
/// specially, else in single quotes.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_the_shell_would_split_or_expand_are_quoted() {
        assert_eq!(shell_quote("--listen=127.0.0.1:0"), "--listen=127.0.0.1:0");
        assert_eq!(shell_quote("/a dir/x"), "'/a dir/x'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }
}
