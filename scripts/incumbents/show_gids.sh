#!/usr/bin/env bash
# The incumbent for `rdmatopo gids`: the loop of mlnx-tools' `show_gids` (MLNX_OFED),
# one `cat` per GID slot and per attribute, here reading under a root directory
# (ROOT=/ for the live system) so it runs on the same trees as rdmatopo.
#   ROOT=fixtures/h100-dgx/root scripts/incumbents/show_gids.sh [DEV]
ROOT=${ROOT:-}
IB=$ROOT/sys/class/infiniband
echo -e "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV"
echo -e "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---"
DEVS=$1
if [ -z "$DEVS" ]; then
	DEVS=$(ls "$IB/")
fi
n=0
for d in $DEVS; do
	for p in $(ls "$IB/$d/ports/"); do
		for g in $(ls "$IB/$d/ports/$p/gids/"); do
			gid=$(cat "$IB/$d/ports/$p/gids/$g")
			if [ "$gid" = 0000:0000:0000:0000:0000:0000:0000:0000 ]; then
				continue
			fi
			if [ "$gid" = fe80:0000:0000:0000:0000:0000:0000:0000 ]; then
				continue
			fi
			_ndev=$(cat "$IB/$d/ports/$p/gid_attrs/ndevs/$g" 2>/dev/null)
			__type=$(cat "$IB/$d/ports/$p/gid_attrs/types/$g" 2>/dev/null)
			_type=$(echo "$__type" | grep -o "[Vv].*")
			if [ "$(echo "$gid" | cut -d ":" -f -1)" = "0000" ]; then
				ipv4=$(printf "%d.%d.%d.%d" 0x${gid:30:2} 0x${gid:32:2} 0x${gid:35:2} 0x${gid:37:2})
				echo -e "$d\t$p\t$g\t$gid\t$ipv4  \t$_type\t$_ndev"
			else
				echo -e "$d\t$p\t$g\t$gid\t\t\t$_type\t$_ndev"
			fi
			n=$((n + 1))
		done
	done
done
echo "n_gids_found=$n"
