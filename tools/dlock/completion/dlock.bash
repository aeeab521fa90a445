# bash completion for dlock(1): subcommands, their options, lock store URL
# schemes and SQLite file paths, and the command after `--` in run and elect.
#
# Installed as share/bash-completion/completions/dlock, where bash-completion
# loads it the first time dlock is completed; or source it from ~/.bashrc.
# It needs nothing from bash-completion.

_dlock_schemes="redis:// rediss:// redlock:// redlock+tls:// postgres:// postgresql:// zk:// sqlite:///"

# Options of each subcommand (--url, -q and -v are accepted by all of them).
_dlock_common_opts="--url -q --quiet -v --verbose -h --help"
_dlock_opts_run="--ttl --wait --grace --fair --shared --permits --label"
_dlock_opts_elect="--id --ttl --wait --grace"
_dlock_opts_status="--json --prometheus"
_dlock_opts_list="--json"
_dlock_opts_migrate=""
_dlock_opts_tx="--json"

# Options followed by a value (as a separate word or after '=').
_dlock_value_opts=" --url --ttl --wait --grace --permits --id --label "

# _dlock_url_reply WORD: URL completions of WORD (schemes; paths after sqlite://).
_dlock_url_reply() {
  local word="$1" path
  if [[ $word == sqlite://* ]]; then
    path="${word#sqlite://}"
    local IFS=$'\n'
    # shellcheck disable=SC2207  # one path a line
    COMPREPLY=($(compgen -f -- "$path"))
    COMPREPLY=("${COMPREPLY[@]/#/sqlite://}")
    local i
    for i in "${!COMPREPLY[@]}"; do
      [[ -d ${COMPREPLY[i]#sqlite://} ]] && COMPREPLY[i]+=/
    done
  else
    # shellcheck disable=SC2207  # the schemes have no spaces
    COMPREPLY=($(compgen -W "$_dlock_schemes" -- "$word"))
  fi
  compopt -o nospace 2>/dev/null
}

_dlock() {
  COMPREPLY=()
  # The words up to the cursor, split on blanks only: a URL's ':' and an
  # option's '=' stay in their word (COMP_WORDS splits there).
  local line="${COMP_LINE:0:COMP_POINT}" words=()
  read -ra words <<<"$line"
  [[ $line =~ [[:blank:]]$ || ${#words[@]} -eq 0 ]] && words+=("")
  local cword=$((${#words[@]} - 1))
  local cur="${words[cword]}" prev=""
  ((cword > 0)) && prev="${words[cword - 1]}"

  # The subcommand, the positional arguments after it, and whether `--`
  # came (then the rest is a command to run).
  local sub="" positional=0 dashdash=-1 i word
  for ((i = 1; i < cword; i++)); do
    word="${words[i]}"
    if ((dashdash >= 0)); then
      break
    elif [[ $word == -- ]]; then
      dashdash=$i
    elif [[ $_dlock_value_opts == *" $word "* ]]; then
      ((i++))  # its value
    elif [[ $word == -* ]]; then
      :
    elif [[ -z $sub ]]; then
      sub="$word"
    else
      ((positional++))
    fi
  done

  # After `--`: the command, then its arguments (files).
  if ((dashdash >= 0)); then
    if ((cword == dashdash + 1)); then
      # shellcheck disable=SC2207  # command names have no spaces
      COMPREPLY=($(compgen -c -- "$cur" | sort -u))
    else
      compopt -o default 2>/dev/null
    fi
    return 0
  fi

  # bash replaces only the part of the word after its last ':' or '=' (when
  # they break words): the replies lose what comes before.
  local keep="" c
  for ((i = ${#cur} - 1; i >= 0; i--)); do
    c="${cur:i:1}"
    if [[ $c == [:=] && $COMP_WORDBREAKS == *"$c"* ]]; then
      keep="${cur:0:i+1}"
      break
    fi
  done

  local value_of="" value=""
  if [[ $cur == --*=* ]]; then
    value_of="${cur%%=*}"
    value="${cur#*=}"
  elif [[ $_dlock_value_opts == *" $prev "* ]]; then
    value_of="$prev"
    value="$cur"
  fi

  if [[ -n $value_of ]]; then
    case "$value_of" in
      --url) _dlock_url_reply "$value" ;;
      *) ;;  # durations, counts, ids and labels: nothing to offer
    esac
    if [[ $cur == --*=* ]]; then
      COMPREPLY=("${COMPREPLY[@]/#/${value_of}=}")
    fi
  elif [[ -z $sub ]]; then
    if [[ $cur == -* ]]; then
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -W "--url -q --quiet -v --verbose --version -h --help" -- "$cur"))
    else
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -W "run elect status list migrate tx" -- "$cur"))
    fi
  else
    local opts_var="_dlock_opts_${sub}"
    if ! [[ $sub =~ ^(run|elect|status|list|migrate|tx)$ ]]; then
      return 0
    elif [[ $cur == -* ]]; then
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -W "${!opts_var} $_dlock_common_opts" -- "$cur"))
    elif [[ $sub == migrate && $positional -eq 0 ]]; then
      _dlock_url_reply "$cur"
    elif [[ $sub == tx && $positional -eq 0 ]]; then
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -W "list show retry" -- "$cur"))
    elif [[ $sub =~ ^(run|elect)$ && $positional -ge 1 ]]; then
      # shellcheck disable=SC2207
      COMPREPLY=($(compgen -W "--" -- "$cur"))
    fi
  fi

  if [[ -n $keep ]]; then
    COMPREPLY=("${COMPREPLY[@]#"$keep"}")
  fi
  return 0
}

complete -F _dlock dlock
