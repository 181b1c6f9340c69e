# The sandbox launcher (x86-64 Linux): sets the run's rlimits on itself,
# then execs argv[1] with argv[1:] and the environment. Assembled with
#   as --64 -o launcher.o launcher_amd64.s && objcopy -O binary -j .text launcher.o launcher.bin
# its bytes are launcherCode in launcher_amd64.go (TestLauncherCodeMatchesSource
# checks). The limits table follows the code directly (label table):
# a count, then per limit {resource, soft, hard}, 64 bits each. On a
# failure it writes 3 bytes to fd 3 (tag 'L' or 'E', the limit's index,
# errno) and exits 127; fd 3 is made close-on-exec first, so the program
# never gets it, and every descriptor above it is closed (a server started
# with stray descriptors does not hand them to agent code).
	.intel_syntax noprefix
	.text
	.globl _start
_start:
	mov edi, 3
	mov esi, 2              # F_SETFD
	mov edx, 1              # FD_CLOEXEC
	mov eax, 72             # fcntl
	syscall
	mov edi, 4
	mov esi, -1             # close_range(4, ~0U, 0)
	xor edx, edx
	mov eax, 436            # close_range (Linux 5.9; its result is not checked)
	syscall
	lea rbx, [rip + table]
	mov r12, [rbx]          # count
	add rbx, 8
	xor r13d, r13d          # index
next:
	cmp r13, r12
	jae limits_done
	xor edi, edi            # pid 0: this process
	mov esi, [rbx]          # resource
	lea rdx, [rbx + 8]      # new limit {soft, hard}
	xor r10d, r10d          # old limit: not wanted
	mov eax, 302            # prlimit64
	syscall
	test rax, rax
	jnz fail_limit
	add rbx, 24
	inc r13
	jmp next
limits_done:
	mov edi, 0x3f           # umask 077
	mov eax, 95             # umask
	syscall
	mov rcx, [rsp]          # argc
	lea rsi, [rsp + 16]     # &argv[1]
	mov rdi, [rsi]          # argv[1]
	lea rdx, [rsp + rcx*8 + 16]  # envp = &argv[argc + 1]
	mov eax, 59             # execve
	syscall
	mov r14d, 0x45          # 'E'
	xor r13d, r13d
	jmp report
fail_limit:
	mov r14d, 0x4c          # 'L'
report:
	neg rax                 # errno
	sub rsp, 16
	mov [rsp], r14b
	mov [rsp + 1], r13b
	mov [rsp + 2], al
	mov edi, 3
	mov rsi, rsp
	mov edx, 3
	mov eax, 1              # write
	syscall
	mov edi, 127
	mov eax, 231            # exit_group
	syscall
table:
