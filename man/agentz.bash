# bash completion for agentz (installed as
# share/bash-completion/completions/agentz): the subcommands, the options
# each one's --help names, the values of the options that take a word,
# ctl's commands and the run names `agentz runs` lists. Builtins only
# (no bash-completion helpers needed).

# The options `agentz [SUB] --help` prints, once per subcommand a session.
_agentz_opts()
{
	local sub=$1 var="_agentz_opts_${1:-run}"

	if [ -z "${!var}" ]; then
		printf -v "$var" '%s' "$("${_agentz_cmd:-agentz}" $sub --help \
		    2>&1 | grep -o -- '--[a-z][a-z-]*' | sort -u | tr '\n' ' ')"
	fi
	printf '%s' "${!var}"
}

# The run names `agentz runs` lists (its first column, the header skipped).
_agentz_runs()
{
	"${_agentz_cmd:-agentz}" runs 2>/dev/null | sed -n '2,$s/ .*//p'
}

_agentz()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local sub="" i words
	_agentz_cmd=${COMP_WORDS[0]}

	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		exec|report|ctl|runs) sub=${COMP_WORDS[i]}; break ;;
		-*) ;;
		*) break ;;
		esac
	done

	case $prev in
	--sandbox) words="off default strict" ;;
	--snapshot) words="auto always never" ;;
	--isolation) words="required best-effort off" ;;
	--network) words="none host" ;;
	--journal|--worker|--workspace|--ro-bind|--bind|--mask|-o|--output)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--model|--base-url|--service-tier|--request-timeout|--max-output-tokens|\
	--max-retries|--outage-patience|--max-restarts|--max-cells|--deadline|\
	--max-tokens|--max-cost|--price|--max-same-failure|--max-parallel-calls|\
	--output-limit|--cell-timeout|--grace|--memory-limit|--pass-env|\
	--max-frame|--tmp-size|--workspace-size|--max-shown)
		return ;;
	esac
	if [ -n "$words" ]; then
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
		return
	fi

	case $sub in
	ctl)
		if [ "$prev" = ctl ]; then
			COMPREPLY=($(compgen -W "$(_agentz_runs)" -- "$cur"))
		elif [ "${COMP_WORDS[COMP_CWORD-2]}" = ctl ]; then
			COMPREPLY=($(compgen -W "status note stop pause resume \
			    kill-cell budgets allow deny network approve reject" -- "$cur"))
		elif [ "$prev" = stop ]; then
			COMPREPLY=($(compgen -W "--now" -- "$cur"))
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--max-cells --deadline \
			    --max-tokens --max-cost --max-same-failure \
			    --max-parallel-calls" -- "$cur"))
		fi
		return ;;
	exec|report|runs)
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$(_agentz_opts "$sub")" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_agentz_opts "")" -- "$cur"))
	elif [ "$COMP_CWORD" = 1 ]; then
		COMPREPLY=($(compgen -W "exec report ctl runs" -- "$cur"))
	fi
}
complete -F _agentz agentz
