
	/host:CPU
"€ˆÞ¾