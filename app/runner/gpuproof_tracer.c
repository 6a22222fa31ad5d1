/*
 * gpuproof's kernel-launch tracer, loaded into a test process by the CUDA driver
 * through CUDA_INJECTION64_PATH. It subscribes to CUPTI's driver-API callbacks and
 * counts every cuLaunch* call by kernel name. Only the driver domain is traced: the
 * runtime API (cudaLaunchKernel) goes through the driver, so each launch is counted
 * once whichever API the program used. At exit it writes
 *   {"launches": N, "kernels": {"name": count, ...}}
 * to $GPUPROOF_TRACE_FILE (or stderr).
 *
 * Build on the GPU host: nvcc -shared -Xcompiler -fPIC -o libgpuproof_tracer.so \
 *   gpuproof_tracer.c -I$CUDA/extras/CUPTI/include -L$CUDA/extras/CUPTI/lib64 -lcupti
 */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_KERNELS 4096
#define NAME_LEN 512

static struct {
    char name[NAME_LEN];
    unsigned long count;
} kernels[MAX_KERNELS];
static int kernel_count = 0;
static unsigned long launches = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_SubscriberHandle subscriber;

static void record(const char *name) {
    if (name == NULL) name = "<unnamed>";
    pthread_mutex_lock(&lock);
    launches++;
    for (int i = 0; i < kernel_count; i++) {
        if (strncmp(kernels[i].name, name, NAME_LEN - 1) == 0) {
            kernels[i].count++;
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    if (kernel_count < MAX_KERNELS) {
        strncpy(kernels[kernel_count].name, name, NAME_LEN - 1);
        kernels[kernel_count].count = 1;
        kernel_count++;
    }
    pthread_mutex_unlock(&lock);
}

static void CUPTIAPI on_driver_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                    const void *payload) {
    const CUpti_CallbackData *call = (const CUpti_CallbackData *)payload;
    (void)userdata; (void)domain; (void)id;
    if (call->callbackSite != CUPTI_API_ENTER || call->functionName == NULL) return;
    /* cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel and their _ptsz forms;
       not cuLaunchHostFunc, which runs host code. */
    if (strncmp(call->functionName, "cuLaunch", 8) != 0 || strstr(call->functionName, "HostFunc")) return;
    record(call->symbolName);
}

static void write_json_string(FILE *out, const char *text) {
    fputc('"', out);
    for (const char *c = text; *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', out);
        if ((unsigned char)*c >= 0x20) fputc(*c, out);
    }
    fputc('"', out);
}

static void write_report(void) {
    const char *path = getenv("GPUPROOF_TRACE_FILE");
    const char *dir = getenv("GPUPROOF_TRACE_DIR");
    char per_process[4096];
    if (path == NULL && dir != NULL) {
        snprintf(per_process, sizeof per_process, "%s/trace-%ld.json", dir, (long)getpid());
        path = per_process;
    }
    FILE *out = path ? fopen(path, "w") : stderr;
    if (out == NULL) return;
    char exe[4096];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[length > 0 ? length : 0] = '\0';
    pthread_mutex_lock(&lock);
    fprintf(out, "{\"launches\": %lu, \"kernels\": {", launches);
    for (int i = 0; i < kernel_count; i++) {
        if (i) fputs(", ", out);
        write_json_string(out, kernels[i].name);
        fprintf(out, ": %lu", kernels[i].count);
    }
    fputs("}, \"exe\": ", out);
    write_json_string(out, exe);
    fputs("}\n", out);
    pthread_mutex_unlock(&lock);
    if (out != stderr) fclose(out);
}

int InitializeInjection(void) {
    if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_driver_call, NULL) != CUPTI_SUCCESS) return 0;
    if (cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) return 0;
    atexit(write_report);
    return 1;
}
