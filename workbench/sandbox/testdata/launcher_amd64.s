# The sandbox launcher (x86-64 Linux). It makes no decision of its own: it
# runs tables of system calls that launcher.go builds, and forks where the
# header says. Assembled with
#   as --64 -o launcher.o launcher_amd64.s && objcopy -O binary -j .text launcher.o launcher.bin
# its bytes are launcherCode in launcher_amd64.go (TestLauncherCodeMatchesSource
# checks). The header follows the code directly (label table):
#   +0  mode: 0, this process runs table 2 and execs argv[1:];
#       1, it runs table 0, forks the namespace's init (table 1, then
#       pause forever) and the program (table 2, then exec), runs table
#       3, and waits for the program or for descriptor 4 to be readable
#       (its write end closed: the run is cancelled); then it kills the
#       init (the kernel kills the whole PID namespace with it), reaps
#       both, and reports the program's wait status
#   +8  table 0, +16 table 1, +24 table 2, +32 table 3: addresses, 0 for none
#   +40 the address of 64 writable bytes (a segment of its own)
# A table is a count, then per entry the system call number (low 32 bits;
# bit 32 set: a failure is ignored) and six arguments, 64 bits each. Every
# report is 8 bytes on descriptor 3: a tag ('F' a table entry or a fork
# failed, 'E' the exec failed, 'X' the program's wait status), the table
# (4: the launcher's own steps), the entry's index, 0, and the errno or
# the status (32 bits). After a failure the process exits 127.
	.intel_syntax noprefix
	.text
	.globl _start
_start:
	mov rbp, rsp                    # argc, argv, envp: kept for the exec
	lea r15, [rip + table]
	mov rdi, [r15 + 8]
	xor esi, esi
	call run
	cmp qword ptr [r15], 0
	je child
	mov eax, 57                     # fork: the namespace's init
	syscall
	test rax, rax
	js fail_fork_init
	jz init
	mov r12, rax
	mov eax, 57                     # fork: the program
	syscall
	test rax, rax
	js fail_fork_child
	jz child
	mov r13, rax
	mov rdi, [r15 + 32]
	mov esi, 3
	call run
	mov edi, r13d
	xor esi, esi
	mov eax, 434                    # pidfd_open(program, 0)
	syscall
	test rax, rax
	js fail_pidfd
	mov rbx, [r15 + 40]
	mov dword ptr [rbx], eax        # pollfd 0: the program's pidfd
	mov dword ptr [rbx + 4], 1      # POLLIN
	mov dword ptr [rbx + 8], 4      # pollfd 1: the cancel pipe
	mov dword ptr [rbx + 12], 1
wait_either:
	mov rdi, rbx
	mov esi, 2
	mov edx, -1
	mov eax, 7                      # poll
	syscall
	cmp rax, -4                     # EINTR
	je wait_either
	call kill_init
reap_program:
	mov edi, r13d
	lea rsi, [rbx + 16]
	xor edx, edx
	xor r10d, r10d
	mov eax, 61                     # wait4(program, &status, 0, 0)
	syscall
	cmp rax, -4
	je reap_program
	call reap_init
	mov dword ptr [rbx + 24], 0x58  # 'X', 0, 0, 0
	mov eax, [rbx + 16]
	mov [rbx + 28], eax
	mov edi, 3
	lea rsi, [rbx + 24]
	mov edx, 8
	mov eax, 1                      # write
	syscall
	xor edi, edi
	mov eax, 231                    # exit_group(0)
	syscall
init:
	mov rdi, [r15 + 16]
	mov esi, 1
	call run
idle:
	mov eax, 34                     # pause
	syscall
	jmp idle
child:
	mov rdi, [r15 + 24]
	mov esi, 2
	call run
	mov rcx, [rbp]                  # argc
	lea rsi, [rbp + 16]             # &argv[1]
	mov rdi, [rsi]                  # argv[1]
	lea rdx, [rbp + rcx*8 + 16]     # envp = &argv[argc + 1]
	mov eax, 59                     # execve
	syscall
	mov r8d, 0x45                   # 'E'
	mov r9d, 2
	mov r10d, 255
	jmp fail
fail_fork_init:
	xor r10d, r10d
	jmp fail_own
fail_fork_child:
	push rax
	call kill_init
	call reap_init
	pop rax
	mov r10d, 1
	jmp fail_own
fail_pidfd:
	push rax
	call kill_init
	mov edi, r13d
	xor esi, esi
	xor edx, edx
	xor r10d, r10d
	mov eax, 61
	syscall
	call reap_init
	pop rax
	mov r10d, 2
fail_own:
	mov r8d, 0x46                   # 'F'
	mov r9d, 4
	jmp fail
# kill_init sends SIGKILL to the init (r12): the kernel then kills every
# process of its PID namespace.
kill_init:
	mov edi, r12d
	mov esi, 9
	mov eax, 62                     # kill
	syscall
	ret
# reap_init waits for the init, which exits only once every process of
# its namespace is gone.
reap_init:
	mov edi, r12d
	xor esi, esi
	xor edx, edx
	xor r10d, r10d
	mov eax, 61                     # wait4(init, 0, 0, 0)
	syscall
	cmp rax, -4
	je reap_init
	ret
# run executes the table at rdi (none when 0); esi is its number, for a
# report.
run:
	test rdi, rdi
	jz run_none
	push rbx
	push r12
	push r13
	push r14
	mov rbx, rdi
	mov r14d, esi
	mov r12, [rbx]                  # count
	add rbx, 8
	xor r13d, r13d                  # index
run_next:
	cmp r13, r12
	jae run_done
	mov eax, [rbx]
	mov rdi, [rbx + 8]
	mov rsi, [rbx + 16]
	mov rdx, [rbx + 24]
	mov r10, [rbx + 32]
	mov r8, [rbx + 40]
	mov r9, [rbx + 48]
	syscall
	cmp rax, -4095
	jae run_failed
run_step:
	add rbx, 56
	inc r13
	jmp run_next
run_failed:
	test byte ptr [rbx + 4], 1
	jnz run_step
	mov r8d, 0x46                   # 'F'
	mov r9d, r14d
	mov r10d, r13d
	jmp fail
run_done:
	pop r14
	pop r13
	pop r12
	pop rbx
run_none:
	ret
# fail reports r8b (tag), r9b (table), r10b (index) and the errno -rax on
# descriptor 3, then exits 127.
fail:
	neg rax
	sub rsp, 16
	mov [rsp], r8b
	mov [rsp + 1], r9b
	mov [rsp + 2], r10b
	mov byte ptr [rsp + 3], 0
	mov [rsp + 4], eax
	mov edi, 3
	mov rsi, rsp
	mov edx, 8
	mov eax, 1                      # write
	syscall
	mov edi, 127
	mov eax, 231                    # exit_group
	syscall
table:
