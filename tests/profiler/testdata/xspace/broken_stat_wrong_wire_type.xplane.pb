
	/host:CPU"	"x