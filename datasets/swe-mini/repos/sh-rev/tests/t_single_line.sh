[ "$(echo one | sh rev_lines.sh)" = one ]
