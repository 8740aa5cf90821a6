#!/usr/bin/env bash
# The incumbent for `rdmatopo netdevs`: the loop of `ibdev2netdev` (MLNX_OFED /
# mlnx-tools): for every RDMA device and port, the netdevs of its PCI function matched
# by dev_port (dev_id on old kernels), with their operstate. Reads under ROOT.
#   ROOT=fixtures/h100-dgx/root scripts/incumbents/ibdev2netdev.sh
ROOT=${ROOT:-}
for d in "$ROOT"/sys/class/infiniband/*; do
	ibdev=$(basename "$d")
	for port in $(ls "$d/ports"); do
		found=
		for ndev in $(ls "$d/device/net" 2>/dev/null); do
			nd=$ROOT/sys/class/net/$ndev
			dev_port=$(cat "$nd/dev_port" 2>/dev/null)
			dev_id=$(cat "$nd/dev_id" 2>/dev/null)
			if [ -n "$dev_port" ] && [ "$dev_port" != 0 ]; then
				idx=$((dev_port + 1))
			else
				idx=$((dev_id + 1))
			fi
			if [ "$idx" = "$port" ] || [ "$(ls "$d/ports" | wc -w)" = 1 ]; then
				state=$(cat "$nd/operstate" 2>/dev/null)
				[ "$state" = up ] && state=Up || state=Down
				echo "$ibdev port $port ==> $ndev ($state)"
				found=1
			fi
		done
		if [ -z "$found" ]; then echo "$ibdev port $port ==> ?"; fi
	done
done
