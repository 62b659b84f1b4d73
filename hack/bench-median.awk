# Reads `go test -bench` output with -count N and prints, for each benchmark, every run's value
# of each metric and their median (make bench-reconcilers). POSIX awk.
/^Benchmark/ {
	name = $1
	if (!(name in runs)) { order[++names] = name }
	r = ++runs[name]
	for (i = 3; i < NF; i += 2) {
		unit = $(i + 1)
		key = name SUBSEP unit
		if (!(key in seen)) { seen[key] = 1; units[name, ++nunits[name]] = unit }
		val[key, r] = $i
	}
}
END {
	for (b = 1; b <= names; b++) {
		name = order[b]
		printf "%s: %d runs\n", name, runs[name]
		for (u = 1; u <= nunits[name]; u++) {
			unit = units[name, u]
			key = name SUBSEP unit
			n = 0
			for (r = 1; r <= runs[name]; r++) if ((key, r) in val) v[++n] = val[key, r] + 0
			list = ""
			for (i = 1; i <= n; i++) list = list (i > 1 ? ", " : "") v[i]
			for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
			median = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			printf "  %-22s median %-12g runs: %s\n", unit, median, list
		}
	}
}
